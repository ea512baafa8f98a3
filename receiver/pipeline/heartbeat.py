"""Replica liveness: each replica records a heartbeat, and takes back the claims of dead ones.

A claim's lease says how long its owner may take before someone else may try; a replica that
died keeps its claims that long (a minute by default). With heartbeats, the others notice in
``stale_after`` seconds (three missed beats) instead, and free what the dead one held, while a
replica that is alive but slow keeps its claims for as long as it beats, however long a
handler runs (its leases are renewed besides: ``Dispatcher``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from receiver.errors import JobhookError
from receiver.loops import wait_either

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.store import Engine

log = structlog.get_logger(__name__)
MISSED_BEATS = 3
"""A replica is dead once this many heartbeat intervals have passed without one."""


class Heartbeat:
    """Beats for ``owner`` every ``interval`` seconds and frees the claims of stale replicas."""

    def __init__(
        self,
        store: Engine,
        owner: str,
        interval: float = 2.0,
        *,
        on_taken_back: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.owner = owner
        self.interval = interval
        self.stale_after = interval * MISSED_BEATS
        self._on_taken_back = on_taken_back
        self._clock = clock

    async def run_once(self) -> int:
        """Beat once, then take back the claims of replicas that stopped; how many were freed."""
        now = self._clock()
        await self.store.heartbeat(self.owner, now)
        freed = await self.store.take_back_stale(now - self.stale_after)
        if freed:
            log.warning("replica_claims_taken_back", count=freed, stale_after=self.stale_after)
            if self._on_taken_back is not None:
                self._on_taken_back()
        return freed

    async def run(self, stop: asyncio.Event) -> None:
        """Repeat ``run_once`` every ``interval`` until ``stop``."""
        while not stop.is_set():
            try:
                await self.run_once()
            except JobhookError as exc:
                log.warning("heartbeat_failed", error=str(exc))
            await wait_either(stop, asyncio.Event(), self.interval)
