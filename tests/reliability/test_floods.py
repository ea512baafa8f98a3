"""Floods against a real ``jobhook serve``: connections sending ``max_body_bytes`` bodies as fast
as they can, and idle ones that send their headers and never their body, while a separate sender
posts valid webhooks. Memory stays bounded, the valid webhooks keep being acknowledged, the idle
connections are closed after ``server.body_timeout_seconds``, nothing crashes.

The default run is a short version; ``-m flood`` runs the full one (64 + 1,000 connections,
1 MiB bodies, a minute).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import psutil
import pytest

from tests.reliability.service import Service
from tests.support import SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

MIB = 1024 * 1024
BODY_TIMEOUT = 2.0
VALID_MIN = 10  # valid webhooks acknowledged during a flood, at the least


@dataclass(frozen=True)
class Flood:
    floods: int
    idle: int
    body_bytes: int
    seconds: float
    rss_bound_mib: float
    closed_within: float
    """Seconds after which every idle connection must be closed (the body timeout, the
    deadline timer's tick, and the event loop's lag under the flood on 2 shared CPUs)."""


SHORT = Flood(16, 200, 256 * 1024, seconds=6.0, rss_bound_mib=150, closed_within=BODY_TIMEOUT + 5)
FULL = Flood(64, 1000, MIB, seconds=60.0, rss_bound_mib=300, closed_within=BODY_TIMEOUT + 20)


@dataclass
class Tally:
    flood_requests: int = 0
    flood_answers: collections.Counter[str] = field(default_factory=collections.Counter)
    valid: list[float] = field(default_factory=list)  # seconds per acknowledged webhook
    valid_failed: list[str] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)


def _config(tmp_path: Path, body_bytes: int) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
max_body_bytes = {body_bytes}
body_timeout_seconds = {BODY_TIMEOUT}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
""",
        encoding="utf-8",
    )
    return config


async def _flooder(url: str, body: bytes, stop: asyncio.Event, tally: Tally) -> None:
    """Max-size bodies with a wrong signature, back to back on one keep-alive connection."""
    headers = signed_headers(b"something else", msg_id="msg_flood")
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            tally.flood_requests += 1
            try:
                response = await client.post("/webhooks/reducto", content=body, headers=headers)
                tally.flood_answers[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                tally.flood_answers[type(exc).__name__] += 1


async def _valid_sender(url: str, stop: threading.Event, tally: Tally) -> None:
    """On a thread and event loop of its own, so the flooders' work does not delay it."""
    ids = itertools.count()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            n = next(ids)
            body = reducto_body(f"valid-{n}")
            headers = signed_headers(body, msg_id=f"msg_valid{n}")
            started = time.perf_counter()
            try:
                response = await client.post("/webhooks/reducto", content=body, headers=headers)
            except httpx.HTTPError as exc:
                tally.valid_failed.append(type(exc).__name__)
                continue
            if response.status_code == 200:
                tally.valid.append(time.perf_counter() - started)
            else:
                tally.valid_failed.append(str(response.status_code))
            await asyncio.sleep(0.02)


async def _idle(port: int, opened: list[asyncio.StreamReader]) -> asyncio.StreamWriter:
    """Headers announcing a body that never comes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /webhooks/reducto HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    await writer.drain()
    opened.append(reader)
    return writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server ended the connection (EOF after whatever it answered)."""
    try:
        await reader.read()
    except OSError:
        return True
    return reader.at_eof()


async def _sample_rss(process: psutil.Process, stop: asyncio.Event, tally: Tally) -> None:
    while not stop.is_set():
        with contextlib.suppress(psutil.Error):
            tally.rss.append(process.memory_info().rss)
        await asyncio.sleep(0.1)


async def _run(tmp_path: Path, flood: Flood, report: Callable[[str], None]) -> None:
    service = Service(_config(tmp_path, flood.body_bytes), tmp_path / "serve.log")
    service.start()
    tally = Tally()
    try:
        await service.wait_ready()
        assert service.process is not None
        process = psutil.Process(service.process.pid)
        await asyncio.sleep(0.5)
        idle_rss = process.memory_info().rss
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample_rss(process, stop, tally))
        readers: list[asyncio.StreamReader] = []
        writers = [await _idle(service.port, readers) for _ in range(flood.idle)]
        idle_opened = time.monotonic()
        body = b"x" * flood.body_bytes
        workers = [
            asyncio.create_task(_flooder(service.url, body, stop, tally))
            for _ in range(flood.floods)
        ]
        stop_sender = threading.Event()
        sender = asyncio.create_task(
            asyncio.to_thread(asyncio.run, _valid_sender(service.url, stop_sender, tally))
        )
        # The idle connections end after the body timeout, well before the flood does.
        async with asyncio.timeout(flood.closed_within + 10):
            closed = await asyncio.gather(*(_closed_by_server(r) for r in readers))
        idle_closed_after = time.monotonic() - idle_opened
        # The flood lasts its planned time and, on a busy machine, until the separate sender
        # has had enough webhooks answered to say something (bounded: 4 x the plan).
        deadline = idle_opened + 4 * flood.seconds
        while time.monotonic() < deadline and (
            time.monotonic() - idle_opened < flood.seconds or len(tally.valid) < VALID_MIN
        ):
            await asyncio.sleep(0.1)
        stop.set()
        stop_sender.set()
        await asyncio.gather(*workers, sender, sampler)
        for writer in writers:
            writer.close()
        alive = service.process.poll() is None
        assert await service.stop() == 0
    finally:
        service.close()

    peak_mib = (max(tally.rss) - idle_rss) / MIB
    latencies = sorted(tally.valid)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    report(
        f"{flood.floods} flooding connections ({flood.body_bytes // 1024} KiB bodies, "
        f"{tally.flood_requests} sent, answers {dict(tally.flood_answers)}), "
        f"{flood.idle} idle ones closed after "
        f"{idle_closed_after:.1f} s; RSS idle {idle_rss / MIB:.0f} MiB, peak +{peak_mib:.0f} MiB; "
        f"valid webhooks: {len(latencies)} acknowledged, p50 "
        f"{statistics.median(latencies) * 1000:.0f} ms, p99 {p99:.0f} ms"
    )
    assert alive, "the service crashed"
    assert all(closed), f"{closed.count(False)} idle connections were left open"
    assert idle_closed_after < flood.closed_within
    assert tally.flood_requests > flood.floods
    # 401 (the signature) once read; 408 for a body that took longer than the body timeout
    # to arrive (the flooders' own loop falls behind); the connection may be closed after it.
    unexpected = set(tally.flood_answers) - {"401", "408", "RemoteProtocolError", "ReadError"}
    assert not unexpected, tally.flood_answers
    assert tally.flood_answers["401"] > tally.flood_requests / 2, tally.flood_answers
    assert tally.valid_failed == []
    assert len(latencies) >= VALID_MIN
    assert peak_mib < flood.rss_bound_mib, f"RSS grew by {peak_mib:.0f} MiB"


@pytest.mark.timeout(90)
async def test_a_short_flood_and_idle_connections_leave_valid_webhooks_acknowledged(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _run(tmp_path, SHORT, report_figures)


@pytest.mark.flood
@pytest.mark.timeout(600)
async def test_sixty_four_floods_and_a_thousand_idle_connections_for_a_minute(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _run(tmp_path, FULL, report_figures)
