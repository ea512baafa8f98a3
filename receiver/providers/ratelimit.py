"""A per-source request budget that is never exceeded, and that listens to the server."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from receiver.backoff import capped, rate_limit_limit, rate_limit_remaining, rate_limit_reset

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

log = structlog.get_logger(__name__)
HEADROOM = 0.9
"""The share of a server's stated limit a learned budget uses (others may share the key)."""
WINDOW_SECONDS = 60.0
"""The window a RateLimit-Limit counts over when the server does not say (``;w=``)."""

DEFAULT_BUDGETS: dict[str, float] = {
    "knowhere": 60.0,  # Knowhere's guide: 60 requests a minute, RateLimit-* headers, 429s
    # No published limit for the others' status endpoints: a conservative default, learned
    # from RateLimit-Limit / X-RateLimit-Limit as soon as the server sends one.
    "reducto": 300.0,
    "docurift": 120.0,
    "docextract": 100.0,
    # LlamaCloud publishes limits for uploads only, and "20 requests per minute" for free-tier
    # organisations: the free tier's figure, so no plan is throttled by jobhook's polls.
    "llamaparse": 20.0,
    # Textract's Get* quotas are 5 to 10 transactions a second by region, shared by every
    # caller of the account: a fifth of the lowest, so jobhook never crowds the pipeline out.
    "textract": 60.0,
    # Azure Document Intelligence S0: 15 requests a second per resource, polls included, shared
    # with the pipeline's submissions: jobhook keeps to a third of it.
    "azure-docintel": 300.0,
    # Document AI: 1,800 requests a minute per project, shared with the pipeline's batchProcess
    # calls and whatever else polls the operations: jobhook keeps to half of it.
    "google-docai": 900.0,
}
GENERIC_BUDGET = 60.0
"""Any other provider's default budget, per minute."""


def default_budget(provider: str) -> float:
    """A provider's default requests per minute, when ``poll.requests_per_minute`` is unset."""
    return DEFAULT_BUDGETS.get(provider, GENERIC_BUDGET)


class RateLimiter:
    """Spaces requests at least ``60 / requests_per_minute`` seconds apart.

    Even spacing (a token bucket of depth one) keeps every sliding minute within the budget.
    A 429's wait (``defer``) and a low remaining quota (``observe``) push the next slot out.
    Urgent requests (confirming a completion) go before routine ones (polls of jobs with no
    news): a routine request waits while any urgent one is waiting. With ``learn``, the budget
    follows the server's RateLimit-Limit, with headroom, never above ``ceiling``.
    """

    def __init__(
        self,
        requests_per_minute: float,
        *,
        name: str = "",
        learn: bool = False,
        ceiling: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.learn = learn
        self.ceiling = ceiling
        self._clock = clock
        self._sleep = sleep
        self._next = 0.0
        self._urgent = 0
        self.waited = 0.0
        self.waits = 0
        self.learned: float | None = None
        """The server's limit per minute, once it has said (RateLimit-Limit)."""
        self._set_budget(requests_per_minute)

    def _set_budget(self, requests_per_minute: float) -> None:
        self.requests_per_minute = requests_per_minute
        # A 2% margin absorbs clock skew between us and the provider's window.
        self.interval = 60.0 / requests_per_minute * 1.02

    async def acquire(self, *, urgent: bool = False) -> None:
        """Wait for the next free slot, and take it; routine requests let urgent ones first."""
        started = self._clock()
        if urgent:
            self._urgent += 1
        try:
            while True:
                now = self._clock()
                if urgent or self._urgent == 0:
                    slot = max(now, self._next)
                    self._next = slot + self.interval
                    if slot > now:
                        await self._sleep(slot - now)
                    break
                # An urgent request holds the next slot: look again one interval later.
                await self._sleep(max(self._next - now, self.interval))
        finally:
            if urgent:
                self._urgent -= 1
        waited = self._clock() - started
        if waited > 0:
            self.waits += 1
            self.waited += waited

    @property
    def urgent_waiting(self) -> int:
        return self._urgent

    def defer(self, seconds: float) -> None:
        """Make no request for ``seconds`` (a 429's Retry-After), capped and never forever."""
        seconds = capped(seconds) or 0.0
        self._next = max(self._next, self._clock() + seconds)
        log.info("rate_limit_wait", source=self.name, seconds=round(seconds, 3))

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn the server's limit, and slow down when it says few requests remain."""
        if self.learn:
            self._learn(headers)
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

    def _learn(self, headers: Mapping[str, str]) -> None:
        limit = rate_limit_limit(headers)
        if limit is None or limit <= 0:
            return
        per_minute = limit * 60.0 / _window(headers)
        if per_minute == self.learned:
            return
        self.learned = per_minute
        budget = max(per_minute * HEADROOM, 1.0)
        if self.ceiling is not None:
            budget = min(budget, self.ceiling)
        if abs(budget - self.requests_per_minute) > 0.01 * self.requests_per_minute:
            log.info("rate_budget_learned", source=self.name, server_limit_per_minute=per_minute,
                     budget_per_minute=round(budget, 2))  # fmt: skip
        self._set_budget(budget)


def _window(headers: Mapping[str, str]) -> float:
    """The policy's window in seconds (``RateLimit-Policy: 100;w=60``), else a minute."""
    for name in ("ratelimit-policy", "ratelimit-limit", "x-ratelimit-limit"):
        value = headers.get(name, "")
        for part in value.split(";")[1:]:
            key, _, number = part.strip().partition("=")
            if key == "w" and number.isdigit() and 0 < int(number) <= 86_400:
                return float(number)
    return WINDOW_SECONDS
