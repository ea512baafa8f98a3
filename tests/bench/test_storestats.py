"""bench.storestats: the store's checkpoint figures between two scrapes of jobhook's /metrics,
read from the exposition text jobhook itself writes, and the line each phase prints."""

from __future__ import annotations

import dataclasses
import http.server
import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest

from bench import storestats
from receiver.ops.metrics import _wal_families
from receiver.store.connector import WalStats
from receiver.store.sqlite.checkpoint import HOLD_BOUNDS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.metrics_core import Metric

BEFORE = WalStats(
    checkpoints=10, checkpoint_frames=5_000, checkpoint_seconds=1.5, restarts=2,
    hold_bounds=HOLD_BOUNDS, hold_buckets=(0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    hold_seconds=0.004, hold_frames=40, hold_timeouts=0, wal_frames=100, wal_bytes=1 << 20,
)  # fmt: skip


class _Collector:
    def __init__(self, wal: WalStats) -> None:
        self.wal = wal

    def collect(self) -> Iterator[Metric]:
        yield from _wal_families(self.wal)


def _text(wal: WalStats) -> str:
    registry = CollectorRegistry()
    registry.register(_Collector(wal))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def _serve(text: str) -> tuple[http.server.HTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text.encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_the_figures_between_two_scrapes_are_what_the_checkpointer_counted_meanwhile() -> None:
    after = dataclasses.replace(
        BEFORE, checkpoints=14, checkpoint_frames=9_000, checkpoint_seconds=2.25, restarts=5,
        hold_buckets=(0, 1, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0), hold_seconds=0.074,
    )  # fmt: skip
    figures = storestats.delta(_figures(BEFORE), _figures(after))
    assert figures["holds"] == 3
    assert abs(figures["held_seconds"] - 0.07) < 1e-9
    assert figures["longest_hold_ms"] == 100.0  # the one in the (50 ms, 100 ms] bucket
    assert figures["restarts"] == 3
    assert figures["checkpoints"] == 4
    assert figures["checkpoint_frames"] == 4_000
    assert abs(figures["checkpoint_seconds"] - 0.75) < 1e-9
    line = storestats.line(figures | storestats.fsync_figures([0.5, 0.7, 9.0]))
    assert "holds 3 (0.07 s, longest <= 100 ms)" in line
    assert "checkpoints 4 / 0.8 s / 4,000 frames" in line
    assert "max 9.0 ms" in line


def test_a_hold_past_every_bound_is_reported_as_unbounded_and_no_store_as_nothing() -> None:
    after = dataclasses.replace(
        BEFORE, hold_buckets=(0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1), hold_seconds=3.0
    )
    figures = storestats.delta(_figures(BEFORE), _figures(after))
    assert figures["holds"] == 1
    assert figures["longest_hold_ms"] == float("inf")
    assert storestats.delta({}, _figures(after)) == {}  # a PostgreSQL row: no such families
    server, url = _serve("")
    server.shutdown()
    server.server_close()
    assert storestats.read(url) == {}  # nothing answers: nothing to report


def _figures(wal: WalStats) -> dict[str, float]:
    server, url = _serve(_text(wal))
    try:
        return storestats.read(url)
    finally:
        server.shutdown()
        server.server_close()
