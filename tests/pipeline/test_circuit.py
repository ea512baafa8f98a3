"""A handler whose loopback HTTP destination is down: its circuit opens after 5 failures, no
more attempts are spent while it is down (probes cost none), and once the destination returns
every delivery arrives, each once."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from handlers.http import HttpHandler
from receiver.config.settings import HandlerSettings
from receiver.pipeline.dispatcher import Dispatcher
from receiver.pipeline.resolver import Resolver
from receiver.store.sqlite.store import SQLiteStore
from tests.store.test_contract import SOURCE, complete
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from starlette.requests import Request

JOBS = [f"job-{n}" for n in range(10)]


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 20) -> None:
    async with asyncio.timeout(seconds):
        while not await check():
            await asyncio.sleep(0.05)


async def test_a_down_destination_opens_the_circuit_and_everything_arrives_after(
    tmp_path: Path,
) -> None:
    received: list[str] = []

    async def hook(request: Request) -> Response:
        received.append((await request.json())["job_id"])
        return Response(status_code=204)

    port = free_port()
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    policy = HandlerSettings(
        name="hook", type="http", max_attempts=8, backoff_initial=0.01, backoff_max=0.05,
        circuit_failures=5, circuit_cooldown_seconds=0.3,
    )  # fmt: skip
    handler = HttpHandler(name="hook", url=f"http://127.0.0.1:{port}/hook", timeout=2)
    # One delivery at a time, so no attempt is in flight when the circuit opens.
    dispatcher = Dispatcher(
        store, {"hook": handler}, {"hook": policy}, Resolver({}, None, tmp_path), concurrency=1
    )
    for job_id in JOBS:
        await complete(store, job_id, "hook")

    async def attempts() -> int:
        rows = [d for j in JOBS for d in await store.dispatches_for(SOURCE, j)]
        assert all(d.state != "dead" for d in rows)
        return sum(d.attempts for d in rows)

    async def circuit() -> str:
        return next((c.state for c in await store.circuits()), "closed")

    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    try:
        await until(lambda: _equals(circuit(), "open"))
        assert await attempts() == 5
        await asyncio.sleep(1.5)  # several cool-downs: each probe fails, none is counted
        assert await attempts() == 5
        app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
        async with live_server(app, port=port):
            await until(lambda: _delivered(store))
        assert sorted(received) == sorted(JOBS)
        assert await circuit() == "closed"
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await handler.close()
        await store.close()


async def _equals(value: Awaitable[str], expected: str) -> bool:
    return await value == expected


async def _delivered(store: SQLiteStore) -> bool:
    rows = [d for j in JOBS for d in await store.dispatches_for(SOURCE, j)]
    return all(d.state == "succeeded" for d in rows)


async def test_a_probe_on_request_sends_one_attempt_at_once_and_reports_its_outcome(
    tmp_path: Path,
) -> None:
    up = False

    async def hook(request: Request) -> Response:
        return Response(status_code=204 if up else 503)

    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    policy = HandlerSettings(
        name="hook", type="http", max_attempts=8, backoff_initial=0.01, backoff_max=0.05,
        circuit_failures=2, circuit_cooldown_seconds=600,
    )  # fmt: skip
    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    port = free_port()
    handler = HttpHandler(name="hook", url=f"http://127.0.0.1:{port}/hook", timeout=2)
    dispatcher = Dispatcher(
        store, {"hook": handler}, {"hook": policy}, Resolver({}, None, tmp_path), concurrency=1
    )
    for job_id in JOBS[:3]:
        await complete(store, job_id, "hook")

    async def tries() -> int:
        return len([a for j in JOBS[:3] for a in await store.attempts_for(SOURCE, j)])

    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    try:
        async with live_server(app, port=port):
            await until(lambda: _equals(_circuit(store), "open"))
            before = await tries()
            assert await dispatcher.probe("hook", wait=10) == "open"  # failed: open again
            assert await tries() == before + 1  # one attempt, at once (the cool-down is 600 s)
            up = True
            assert await dispatcher.probe("hook", wait=10) == "closed"
            await until(lambda: _all_delivered(store, JOBS[:3]))
            assert await dispatcher.probe("hook", wait=10) is None  # closed: nothing to do
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await handler.close()
        await store.close()


async def _circuit(store: SQLiteStore) -> str:
    return next((c.state for c in await store.circuits()), "closed")


async def _all_delivered(store: SQLiteStore, jobs: list[str]) -> bool:
    rows = [d for j in jobs for d in await store.dispatches_for(SOURCE, j)]
    return all(d.state == "succeeded" for d in rows)
