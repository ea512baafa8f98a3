"""The dispatcher honours a destination's Retry-After, within the handler's backoff cap."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest

from receiver.config.settings import HandlerSettings
from receiver.errors import RetryableError
from receiver.pipeline.dispatcher import Dispatcher
from receiver.pipeline.resolver import Resolver
from receiver.store.sqlite import SQLiteStore
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
