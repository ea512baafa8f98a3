"""The dispatcher honours a destination's Retry-After, within the handler's backoff cap, and
keeps each handler within its share of the dispatch slots."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest

from receiver.config.settings import HandlerSettings
from receiver.errors import RetryableError
from receiver.pipeline.dispatcher import Dispatcher, default_limit
from receiver.pipeline.resolver import Resolver
from receiver.store.sqlite.store import SQLiteStore
from tests.store.test_contract import SOURCE, complete

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.completion import Completion


class BusyHandler:
    """Always answers like a destination's 429 with ``Retry-After: wait``."""

    name = "busy"

    def __init__(self, wait: float | None) -> None:
        self.wait = wait

    async def handle(self, completion: Completion) -> None:
        raise RetryableError("POST answered 429", retry_after=self.wait)


@pytest.mark.parametrize(
    ("wait", "low", "high"),
    [
        (120.0, 120.0, 120.0),  # longer than the backoff: honoured
        (10_000.0, 300.0, 300.0),  # longer than backoff_max: capped
        (None, 0.5, 1.0),  # none given: the backoff (initial 1 s, first attempt)
        (0.1, 0.5, 1.0),  # shorter than the backoff: the backoff stands
    ],
)
async def test_the_next_attempt_waits_for_retry_after_within_the_cap(
    tmp_path: Path, wait: float | None, low: float, high: float
) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    try:
        await complete(store, "job-1", "busy")
        dispatcher = Dispatcher(
            store,
            {"busy": BusyHandler(wait)},
            {"busy": HandlerSettings(name="busy", type="test", backoff_max=300)},
            Resolver({}, None, tmp_path),
        )
        before = time.time()
        assert await dispatcher.run_once() == 1
        async with asyncio.timeout(5):
            while dispatcher.in_flight:
                await asyncio.sleep(0.01)
        (row,) = await store.dispatches_for(SOURCE, "job-1")
        assert row.state == "pending"
        assert low - 0.01 <= row.next_attempt_at - before <= high + 1
    finally:
        await store.close()


class GatedHandler:
    """A destination that answers only when ``gate`` opens; counts deliveries in flight."""

    def __init__(self, name: str, gate: asyncio.Event) -> None:
        self.name = name
        self.gate = gate
        self.in_flight = 0
        self.peak = 0
        self.done = 0

    async def handle(self, completion: Completion) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        self.done += 1


async def _settle(dispatcher: Dispatcher, rounds: int = 10) -> None:
    """Run loop steps until one starts nothing (what ``run`` does between wake-ups)."""
    for _ in range(rounds):
        started = await dispatcher.run_once()
        await asyncio.sleep(0.02)
        if not started:
            return


@pytest.mark.parametrize(("concurrency", "share"), [(1, 1), (2, 1), (7, 3), (8, 4)])
def test_a_handler_takes_half_the_slots_unless_it_says_otherwise(
    concurrency: int, share: int
) -> None:
    assert default_limit(concurrency) == share


async def test_a_hung_handler_holds_only_its_share_and_the_others_keep_flowing(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    hung = GatedHandler("hung", asyncio.Event())
    opened = asyncio.Event()
    opened.set()
    ok = GatedHandler("ok", opened)
    try:
        for n in range(6):
            await complete(store, f"job-{n}", "hung")
        for n in range(6, 9):
            await complete(store, f"job-{n}", "ok")
        dispatcher = Dispatcher(
            store,
            {"hung": hung, "ok": ok},
            {name: HandlerSettings(name=name, type="test") for name in ("hung", "ok")},
            Resolver({}, None, tmp_path),
            concurrency=4,
        )
        await _settle(dispatcher)
        assert (hung.in_flight, hung.peak, ok.done) == (2, 2, 3)
        assert dispatcher.busy() == ["hung"]
        waiting = [
            d for n in range(6) for d in await store.dispatches_for(SOURCE, f"job-{n}")
            if d.state == "pending"
        ]  # fmt: skip
        assert [d.attempts for d in waiting] == [0, 0, 0, 0]
        hung.gate.set()  # the destination answers: its slots free up, its backlog follows
        async with asyncio.timeout(5):
            while hung.done < 6 or dispatcher.in_flight:
                await _settle(dispatcher)
        assert hung.peak == 2
        assert dispatcher.busy() == []
    finally:
        await store.close()


async def test_max_concurrency_sets_a_handlers_share(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    hung = GatedHandler("hung", asyncio.Event())
    try:
        for n in range(4):
            await complete(store, f"job-{n}", "hung")
        dispatcher = Dispatcher(
            store,
            {"hung": hung},
            {"hung": HandlerSettings(name="hung", type="test", max_concurrency=1)},
            Resolver({}, None, tmp_path),
            concurrency=8,
        )
        await _settle(dispatcher)
        assert (dispatcher.in_flight, hung.in_flight) == (1, 1)
        hung.gate.set()
        async with asyncio.timeout(5):
            while hung.done < 4 or dispatcher.in_flight:
                await _settle(dispatcher)
        assert hung.peak == 1
    finally:
        await store.close()
