"""The dispatcher's side of the handlers' circuits (``receiver.store.circuits`` keeps them).

Each failed attempt is counted in the store, so the circuit is one per handler across
replicas. A success is only written when this process saw the handler fail, or the store's
circuit for it is not closed (a probe): the common case, a healthy handler, costs no write.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import structlog

from receiver.errors import JobhookError

if TYPE_CHECKING:
    from collections.abc import Callable

    from receiver.config.settings import HandlerSettings
    from receiver.store import Store
    from receiver.store.rows import CircuitRow

log = structlog.get_logger(__name__)
REFRESH_SECONDS = 1.0


class Circuits:
    """Counts delivery outcomes into the store's circuits and keeps a recent view of them."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
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
