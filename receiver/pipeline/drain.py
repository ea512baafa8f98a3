"""Whether each source's confirmations can drain in time at its current rate budget.

A burst of completions whose webhooks carry no result (Reducto's never do) waits for one job
API ``GET`` each, within the source's budget. When what is waiting would take longer than
``within`` seconds at the current budget, that is worth knowing before it is a complaint: a
warning with the ETA (at most once per ``within``), a metric, and a line in ``/readyz``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from receiver.errors import JobhookError
from receiver.loops import wait_either

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from receiver.providers.jobapi import JobAPI
    from receiver.store import Engine

log = structlog.get_logger(__name__)
CHECK_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Drain:
    """One source's confirmation backlog against its budget."""

    confirmations: int
    budget_per_minute: float
    eta_seconds: float
    slow: bool
    """True when the backlog cannot drain within the configured time."""

    def as_json(self) -> dict[str, object]:
        return {
            "confirmations": self.confirmations,
            "budget_per_minute": round(self.budget_per_minute, 2),
            "eta_seconds": round(self.eta_seconds, 1),
            "slow": self.slow,
        }


class DrainWatch:
    """Checks every ``check_every`` seconds; ``status`` holds the last reading per source."""

    def __init__(
        self,
        store: Engine,
        apis: Mapping[str, JobAPI],
        within: float = 600.0,
        *,
        check_every: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.apis = apis
        self.within = within
        self.check_every = check_every
        self._clock = clock
        self._warned: dict[str, float] = {}
        self.status: dict[str, Drain] = {}

    async def run_once(self) -> dict[str, Drain]:
        """Read the backlog, compute each source's ETA, warn about slow ones (once a period)."""
        due = await self.store.confirmations_due()
        now = self._clock()
        status: dict[str, Drain] = {}
        for source, api in self.apis.items():
            waiting = due.get(source, 0)
            budget = api.limiter.requests_per_minute
            eta = waiting / budget * 60.0
            drain = status[source] = Drain(waiting, budget, eta, eta > self.within)
            last = self._warned.get(source)
            if drain.slow and (last is None or now - last >= self.within):
                self._warned[source] = now
                log.warning("confirmation_backlog_slow", source=source, confirmations=waiting,
                            budget_per_minute=round(budget, 2), eta_seconds=round(eta),
                            within_seconds=self.within)  # fmt: skip
            elif not drain.slow:
                self._warned.pop(source, None)
        self.status = status
        return status

    async def run(self, stop: asyncio.Event) -> None:
        """Repeat ``run_once`` until ``stop`` (the first reading is taken at startup)."""
        if not self.apis:
            return
        while not stop.is_set():
            await wait_either(stop, asyncio.Event(), self.check_every)
            await self.check()

    async def check(self) -> None:
        """``run_once``, logging a failure instead of raising it."""
        try:
            await self.run_once()
        except JobhookError as exc:
            log.warning("drain_check_failed", error=str(exc))
