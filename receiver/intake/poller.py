"""The fallback poller: asks the provider about every known job whose webhook has not come.

Jobs are due ``grace_seconds`` after their last news (plus a first delay scaled by their page
count); each later poll backs off exponentially with jitter up to ``max_delay``. Requests go
through the source's JobAPI, whose RateLimiter keeps the source within its budget. Answers
enter through the same Ingestor as webhooks, so whichever arrives second dispatches nothing.
One poller per store is active: leadership is a lease in the store.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import structlog

from receiver import tracing
from receiver.backoff import backoff_delay
from receiver.errors import JobhookError, ProviderError
from receiver.loops import wait_either, worker_id
from receiver.models import Event, State
from receiver.providers.jobapi import JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from receiver.config.settings import PollSettings
    from receiver.intake.ingest import Ingestor
    from receiver.providers.jobapi import JobAPI
    from receiver.store import Engine, JobRow

log = structlog.get_logger(__name__)
LEASE_NAME = "poller"
LEASE_SECONDS = 30.0
IDLE_RECHECK_SECONDS = 5.0
NOT_FOUND_LIMIT = 5


class Poller:
    """Polls due jobs of every source with a job API; ``run_once`` is one pass."""

    def __init__(
        self,
        store: Engine,
        ingestor: Ingestor,
        apis: Mapping[str, JobAPI],
        settings: Mapping[str, PollSettings],
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.ingestor = ingestor
        self.apis = {name: api for name, api in apis.items() if name in settings}
        self.settings = settings
        self.owner = owner or worker_id()
        self._clock = clock
        self._reconciled: dict[str, float] = {}
        self._wakeup = asyncio.Event()
        self.leader = False

    def wake(self) -> None:
        """Look for due jobs now (a job was just registered), not at the next idle recheck."""
        self._wakeup.set()

    async def run_once(self) -> int:
        """If this process leads, poll what is due now (a bounded batch per source)."""
        now = self._clock()
        self.leader = await self.store.acquire_lease(LEASE_NAME, self.owner, LEASE_SECONDS, now)
        if not self.leader:
            return 0
        counts = await asyncio.gather(*(self._poll_source(name) for name in self.apis))
        await asyncio.gather(*(self._maybe_reconcile(name) for name in self.apis))
        return sum(counts)

    async def run(self, stop: asyncio.Event) -> None:
        """Repeat ``run_once`` until ``stop``, sleeping until the next poll falls due."""
        if not self.apis:
            return
        while not stop.is_set():
            try:
                polled = await self.run_once()
            except Exception as exc:  # one failed pass must not end polling
                log.error("poll_pass_failed", error=str(exc))
                polled = 0
            if polled:
                continue
            await wait_either(stop, self._wakeup, await self._idle_seconds())
            self._wakeup.clear()

    async def _idle_seconds(self) -> float:
        if not self.leader:
            return LEASE_SECONDS / 3
        try:
            due = await self.store.next_poll_at()
        except JobhookError:
            return 1.0
        if due is None:
            return IDLE_RECHECK_SECONDS
        return min(max(due - self._clock(), 0.0), IDLE_RECHECK_SECONDS)

    async def _poll_source(self, source: str) -> int:
        # A batch is what the budget allows in a quarter of the lease, so leadership is renewed
        # before it can lapse.
        budget = self.apis[source].limiter.requests_per_minute
        batch = max(1, int(budget * LEASE_SECONDS / 4 / 60))
        started = self._clock()
        jobs = await self.store.due_polls(source, started, batch)
        polled = 0
        for job in jobs:
            # Confirmations go first in the budget, so polls may crawl: keep to a quarter of
            # the lease all the same; what is left stays due for the next pass.
            if self._clock() - started > LEASE_SECONDS / 4:
                break
            await self.poll_job(job)
            polled += 1
        return polled

    async def poll_job(self, job: JobRow) -> None:
        """Ask about one job; ingest what changed, then schedule the next poll (or expire it)."""
        settings = self.settings[job.source]
        api = self.apis[job.source]
        now = self._clock()
        attempts = job.poll_attempts + 1
        asked_ns = time.time_ns()
        if now - job.created_at > settings.give_up_after_hours * 3600:
            await self._expire(job, f"no terminal status after {settings.give_up_after_hours} h")
            return
        try:
            status = await api.get_job(job.job_id)
        except JobNotFoundError as exc:
            if attempts >= NOT_FOUND_LIMIT:
                await self._expire(job, f"the provider does not know the job: {exc}")
                return
            await self._schedule(job, attempts, settings, None)
            return
        except ProviderError as exc:
            log.info("poll_failed", source=job.source, job_id=job.job_id, error=str(exc))
            await self._schedule(job, attempts, settings, exc.retry_after)
            return
        except Exception as exc:  # an odd answer must not end the pass, nor stop this job's polls
            log.error("poll_failed", source=job.source, job_id=job.job_id, error=repr(exc))
            await self._schedule(job, attempts, settings, None)
            return
        event = Event(
            source=job.source,
            job_id=job.job_id,
            state=status.state,
            provider_status=status.provider_status,
            via="poll",
            error=status.error,
            error_code=status.error_code,
            progress=status.progress,
            result=status.result if status.state.terminal else None,
        )
        if tracing.enabled() and status.state.terminal:
            # A check that finds the job done starts its completion's trace, from the request on.
            with tracing.span("jobhook.poll", start_ns=asked_ns, attributes={
                "jobhook.source": job.source, "jobhook.job.id": job.job_id,
                "jobhook.attempt": attempts, "jobhook.state": status.state.value,
            }) as span:  # fmt: skip
                event = event.traced(tracing.traceparent())
                result = await self.ingestor.ingest(event)
                span.set("jobhook.outcome", "completed" if result.completed else result.status)
        else:
            result = await self.ingestor.ingest(event)
        if result.completed:
            log.info("job_completed_by_poll", source=job.source, job_id=job.job_id,
                     state=status.state.value)  # fmt: skip
        if not result.state.terminal:
            await self._schedule(job, attempts, settings, status.retry_after)

    async def _schedule(
        self, job: JobRow, attempts: int, settings: PollSettings, retry_after: float | None
    ) -> None:
        delay = backoff_delay(
            attempts, settings.first_delay(job.expected_pages), settings.max_delay
        )
        at = self._clock() + max(delay, retry_after or 0.0)
        await self.store.schedule_poll(job.source, job.job_id, at, attempts)

    async def _expire(self, job: JobRow, reason: str) -> None:
        log.warning("job_expired", alert=True, source=job.source, job_id=job.job_id,
                    reason=reason)  # fmt: skip
        await self.ingestor.ingest(
            Event(
                source=job.source,
                job_id=job.job_id,
                state=State.EXPIRED,
                provider_status=job.provider_status,
                via="poll",
                error=reason,
            )
        )

    async def _maybe_reconcile(self, source: str) -> None:
        settings = self.settings[source]
        now = self._clock()
        if not settings.reconcile or now - self._reconciled.get(source, 0.0) < (
            settings.reconcile_interval_seconds
        ):
            return
        self._reconciled[source] = now
        try:
            await self.reconcile(source)
        except JobhookError as exc:
            log.warning("reconcile_failed", source=source, error=str(exc))

    async def reconcile(self, source: str, max_pages: int = 10) -> int:
        """Track jobs the provider lists that nobody registered; return how many were new."""
        api = self.apis[source]
        cursor: str | None = None
        found = 0
        for _ in range(max_pages):
            page = await api.list_jobs(cursor=cursor)
            if page is None:
                return found
            listed, cursor = page
            for job_id, word in listed:
                if await self.store.get_job(source, job_id) is not None:
                    continue
                state = api.provider.canonical(word, source=source, job_id=job_id)
                now = self._clock()
                await self.ingestor.ingest(
                    Event(source=source, job_id=job_id, state=state, provider_status=word,
                          via="list", poll_at=None if state.terminal else now)
                )  # fmt: skip
                found += 1
            if cursor is None:
                break
        if found:
            log.info("reconciled", source=source, discovered=found)
        return found
