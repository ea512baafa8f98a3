"""The dispatcher's side of the handlers' circuits (``receiver.store.circuits`` keeps them).

Each failed attempt is counted in the store, so the circuit is one per handler across
replicas. A success is only written when this process saw the handler fail, or the store's
circuit for it is not closed (a probe): the common case, a healthy handler, costs no write.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING

import structlog

from receiver.errors import JobhookError

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.config.settings import HandlerSettings
    from receiver.store import Engine
    from receiver.store.rows import CircuitRow

log = structlog.get_logger(__name__)
REFRESH_SECONDS = 1.0
PROBE_POLL_SECONDS = 0.1


class Circuits:
    """Counts delivery outcomes into the store's circuits and keeps a recent view of them."""

    def __init__(self, store: Engine, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self._failing: set[str] = set()
        self._read_at = -math.inf
        self.view: dict[str, CircuitRow] = {}
        """The circuits as last read (at most REFRESH_SECONDS old after ``refresh``)."""

    def state(self, handler: str) -> str:
        row = self.view.get(handler)
        return "closed" if row is None else row.state

    async def refresh(self) -> None:
        """Read the circuits again when the view is older than REFRESH_SECONDS."""
        if self._clock() - self._read_at < REFRESH_SECONDS:
            return
        self._read_at = self._clock()
        self.view = {row.handler: row for row in await self._store.circuits()}

    async def failed(self, handler: str, policy: HandlerSettings) -> None:
        """Count a failed attempt; log when it opens the circuit."""
        self._failing.add(handler)
        before = self.state(handler)
        try:
            state = await self._store.circuit_failed(
                handler, policy.circuit_failures, policy.circuit_cooldown_seconds, self._clock()
            )
        except JobhookError as exc:
            log.warning("circuit_update_failed", handler=handler, error=str(exc))
            return
        if state == "open" and before != "open":
            log.warning("circuit_opened", handler=handler, cooldown=policy.circuit_cooldown_seconds)
        self._read_at = -math.inf  # read the new state at the next step

    async def succeeded(self, handler: str) -> None:
        """A delivery succeeded: close the circuit if this process or the store saw it fail."""
        if handler not in self._failing and self.state(handler) == "closed":
            return
        try:
            await self._store.circuit_succeeded(handler, self._clock())
        except JobhookError as exc:
            log.warning("circuit_update_failed", handler=handler, error=str(exc))
            return
        self._failing.discard(handler)
        if self.state(handler) != "closed":
            log.info("circuit_closed", handler=handler)
        self._read_at = -math.inf

    async def probe_now(self, handler: str, now: float) -> CircuitRow | None:
        """An operator replayed deliveries of ``handler``: when its circuit is open, its one
        probe goes at the next claim (due at ``now``) instead of after the cool-down. The
        circuit as it was (None when closed: the replayed deliveries go as usual)."""
        row = next((r for r in await self._store.circuits() if r.handler == handler), None)
        if row is None or row.state == "closed":
            return None
        await self._store.circuit_probe_now(handler, now)
        self._read_at = -math.inf
        log.info("circuit_probe_requested", handler=handler, state=row.state)
        return row

    async def probe_outcome(self, handler: str, since: float, wait: float) -> str:
        """How the probe asked for at ``since`` ended, read from the store (any replica may run
        it): ``closed`` (it succeeded), ``open`` (it failed: another cool-down) or, when
        ``wait`` seconds pass first, the state it is still in."""
        deadline = time.monotonic() + wait
        while True:
            row = next((r for r in await self._store.circuits() if r.handler == handler), None)
            if row is None or row.state == "closed":
                return "closed"
            if row.state == "open" and row.retry_at is not None and row.retry_at > since:
                return "open"
            if time.monotonic() >= deadline:
                return row.state
            await asyncio.sleep(PROBE_POLL_SECONDS)
