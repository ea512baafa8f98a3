"""Destinations that accept and never answer, or trickle their answer: each attempt ends within
the handler's deadline, and a healthy handler keeps its throughput meanwhile: the hung one
holds at most its share of the dispatch slots (``max_concurrency``), whatever its backlog."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from handlers.http import HttpHandler
from receiver.completion import Completion
from receiver.config.load import load_settings
from receiver.errors import DeliveryError
from receiver.models import State
from receiver.service.app import create_app
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from starlette.requests import Request

    from receiver.config.settings import Settings

TRICKLE = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Padding: " + b"x" * 60 + b"\r\n\r\n"


class Stuck:
    """A TCP server that reads requests and never answers, or answers a byte a second, or (when
    ``hang`` is off) answers 204 at once."""

    def __init__(self, *, trickle_every: float | None = None, hang: bool = True) -> None:
        self.trickle_every = trickle_every
        self.hang = hang
        self.connections = 0
        self.holding = 0
        self.peak = 0
        """The most connections held unanswered at once."""
        self._writers: list[asyncio.StreamWriter] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await reader.readuntil(b"\r\n\r\n")
            if not self.hang:
                writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                await writer.drain()
                writer.close()
                return
            self.connections += 1
            self.holding += 1
            self.peak = max(self.peak, self.holding)
            try:
                await self._stall(reader, writer)
            finally:
                self.holding -= 1

    async def _stall(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.trickle_every is None:
            await reader.read()  # hold the connection until the client gives up
            return
        for byte in TRICKLE:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(self.trickle_every)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            for writer in self._writers:
                writer.close()
            server.close()
            await server.wait_closed()


async def _attempt(handler: HttpHandler) -> tuple[float, DeliveryError]:
    completion = Completion(1, "reducto", "job-1", State.SUCCEEDED, "Completed", {}, None, None)
    started = time.monotonic()
    with pytest.raises(DeliveryError) as caught:
        await handler.handle(completion)
    return time.monotonic() - started, caught.value


@pytest.mark.timeout(30)
async def test_a_destination_that_never_answers_is_given_up_after_the_read_timeout() -> None:
    stuck = Stuck()
    async with stuck.running() as url:
        handler = HttpHandler(name="stuck", url=f"{url}/hook", timeout=0.5, deadline=5)
        try:
            seconds, error = await _attempt(handler)
        finally:
            await handler.close()
    assert error.code == "timeout"
    assert 0.4 < seconds < 2.0, f"the attempt took {seconds:.2f}s"
    assert stuck.connections == 1


@pytest.mark.timeout(30)
async def test_a_destination_that_trickles_its_answer_is_cut_off_by_the_deadline() -> None:
    # A byte a second resets every per-read timer: only the per-attempt deadline ends it
    # (the whole answer would take over a minute).
    stuck = Stuck(trickle_every=1.0)
    async with stuck.running() as url:
        handler = HttpHandler(name="trickle", url=f"{url}/hook", timeout=2, deadline=3)
        try:
            seconds, error = await _attempt(handler)
        finally:
            await handler.close()
    assert error.code == "timeout"
    assert "deadline" in error.summary
    assert 2.9 < seconds < 4.5, f"the attempt took {seconds:.2f}s"


def _settings(tmp_path: Path, healthy: str, stuck: str, *, concurrency: int = 4) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[dispatch]
concurrency = {concurrency}
lease_seconds = 10
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "healthy"
type = "http"
url = "{healthy}/hook"
[[handlers]]
name = "stuck"
type = "http"
url = "{stuck}/hook"
timeout = 3
deadline = 4
backoff_initial = 5
circuit_failures = 1000
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


def _delivered(settings: Settings, handler: str) -> int:
    db_path = settings.store.url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM dispatches WHERE handler = ? AND state = 'succeeded'", (handler,)
        ).fetchone()
    return int(count)


async def _rate(
    url: str, settings: Settings, prefix: str, count: int, budget: float = 15.0
) -> float:
    """Send ``count`` webhooks; deliveries per second to the healthy handler until all arrive
    (or as many as did within ``budget`` seconds)."""
    before = _delivered(settings, "healthy")
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url) as client:
        for n in range(count):
            body = reducto_body(f"{prefix}-{n}")
            headers = signed_headers(body, msg_id=f"msg_{prefix}{n}")
            assert (
                await client.post("/webhooks/reducto", content=body, headers=headers)
            ).is_success
    while (done := _delivered(settings, "healthy") - before) < count:
        if time.monotonic() - started > budget:
            break
        await asyncio.sleep(0.02)
    return done / (time.monotonic() - started)


@pytest.mark.timeout(60)
async def test_a_hung_destination_leaves_a_healthy_handler_its_throughput(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    async def ok(request: Request) -> Response:
        await request.body()
        return Response(status_code=204)

    # Each attempt of the stuck handler holds a slot for 3 s and its circuit never opens here,
    # so only its share of the 4 slots (2) keeps it from holding all of them: without it the
    # healthy handler got 1-2 deliveries/s while the hung one's backlog went by.
    healthy_app = Starlette(routes=[Route("/hook", ok, methods=["POST"])])
    stuck = Stuck(hang=False)
    async with live_server(healthy_app) as healthy, stuck.running() as stuck_url:
        settings = _settings(tmp_path, healthy, stuck_url)
        async with live_server(create_app(settings)) as url:
            # Every webhook is one delivery to each handler.
            await _rate(url, settings, "warm", 20)
            before = await _rate(url, settings, "before", 60)
            stuck.hang = True
            during = await _rate(url, settings, "during", 60)
    report_figures(
        f"healthy handler: {before:.1f} deliveries/s before, {during:.1f}/s while the other "
        f"handler's destination hangs ({stuck.connections} hung connections opened, at most "
        f"{stuck.peak} at once)"
    )
    assert stuck.connections > 0
    assert stuck.peak <= 2  # its share of dispatch.concurrency = 4
    assert during > before * 0.5, f"{during:.1f}/s during the hang, {before:.1f}/s before"
