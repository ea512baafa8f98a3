"""Replicas beat; a slow replica that is alive keeps its claim, a silent one loses it."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from receiver.config.settings import HandlerSettings
from receiver.pipeline.dispatcher import Dispatcher
from receiver.pipeline.heartbeat import Heartbeat
from receiver.pipeline.resolver import Resolver
from receiver.store.sqlite.store import SQLiteStore
from tests.store.test_contract import claim_all, complete, states

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.completion import Completion


class SlowHandler:
    """Takes ``seconds`` over each delivery and counts the calls."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.calls = 0
        self.done = asyncio.Event()

    async def handle(self, completion: Completion) -> None:
        self.calls += 1
        await asyncio.sleep(self.seconds)
        self.done.set()


async def test_a_slow_handler_keeps_its_claim_past_many_leases(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    handler = SlowHandler(2.5)
    stop = asyncio.Event()
    loops = []
    try:
        await complete(store, "job-1", "slow")
        for owner in ("one", "two"):
            dispatcher = Dispatcher(
                store,
                {"slow": handler},
                {"slow": HandlerSettings(name="slow", type="test")},
                Resolver({}, None, tmp_path),
                lease_seconds=0.5,  # the handler outlasts five leases
                owner=owner,
            )
            beat = Heartbeat(store, owner, 0.2, on_taken_back=dispatcher.wake)
            loops += [dispatcher.run(stop, grace=5), beat.run(stop)]
        tasks = [asyncio.create_task(loop) for loop in loops]
        async with asyncio.timeout(10):
            await handler.done.wait()
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks)
        assert handler.calls == 1
        assert await states(store) == {"slow": "succeeded"}
    finally:
        stop.set()
        await store.close()


async def test_a_replica_that_stops_beating_loses_its_claims_to_one_that_beats(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    now = time.time()
    woken: list[str] = []
    try:
        await complete(store, "job-1")
        silent = Heartbeat(store, "silent", 2.0, clock=lambda: now)
        later = [now + 5.9]  # within three beats of the silent one's: it is still alive
        alive = Heartbeat(
            store, "alive", 2.0, on_taken_back=lambda: woken.append("wake"), clock=lambda: later[0]
        )
        await silent.run_once()
        assert len(await claim_all(store, "silent", now + 1, lease=600)) == 1
        assert await alive.run_once() == 0
        later[0] = now + 6.1
        assert await alive.run_once() == 1
        assert woken == ["wake"]
        assert await states(store) == {"files": "pending"}
    finally:
        await store.close()
