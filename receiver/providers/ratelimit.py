"""A per-source request budget that is never exceeded, and that listens to the server."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from receiver.backoff import capped, rate_limit_remaining, rate_limit_reset

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

log = structlog.get_logger(__name__)


class RateLimiter:
    """Spaces requests at least ``60 / requests_per_minute`` seconds apart.

    Even spacing (a token bucket of depth one) keeps every sliding minute within the budget.
    A 429's wait (``defer``) and a low remaining quota (``observe``) push the next slot out.
    """

    def __init__(
        self,
        requests_per_minute: float,
        *,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        # A 2% margin absorbs clock skew between us and the provider's window.
        self.interval = 60.0 / requests_per_minute * 1.02
        self.name = name
        self._clock = clock
        self._sleep = sleep
        self._next = 0.0
        self.waited = 0.0
        self.waits = 0

    async def acquire(self) -> None:
        """Wait for the next free slot, and take it."""
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self.interval
        if slot > now:
            self.waits += 1
            self.waited += slot - now
            await self._sleep(slot - now)

    def defer(self, seconds: float) -> None:
        """Make no request for ``seconds`` (a 429's Retry-After), capped and never forever."""
        seconds = capped(seconds) or 0.0
        self._next = max(self._next, self._clock() + seconds)
        log.info("rate_limit_wait", source=self.name, seconds=round(seconds, 3))

    def observe(self, headers: Mapping[str, str]) -> None:
        """Slow down when the server says few requests remain in its window."""
        quota = rate_limit_remaining(headers)
        if quota is None:
            return
        remaining, limit = quota
        threshold = max(1, (limit or 10) // 10)
        if remaining > threshold:
            return
        reset = rate_limit_reset(headers)
        if reset is None:
            return
        # Spread what remains over the rest of the window; nothing at all when it is spent.
        spacing = reset / remaining if remaining > 0 else reset
        self._next = max(self._next, self._clock() + spacing)
