"""Reprocess: submit a finished job again at its provider, track the new job, link the two.

One job at a time, through the source's ``JobAPI`` (so within the rate budget the poller and
the confirmations use: routine requests, after urgent ones). Each job is claimed in the store
first (``claim_reprocess``), so it is submitted once however often, or by however many replicas,
it is asked for, unless the caller forces it. The new job carries ``reprocessed_from`` in its
metadata (sent to the provider and kept on the tracked job); the old job's link names the new.
A 429 or 5xx is retried here within the budget; what still fails is recorded on the link
(claimable again) and reported, so a reprocess is never lost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import structlog

from receiver.backoff import capped
from receiver.errors import ProviderError
from receiver.models import Event, State
from receiver.providers.jobapi import (
    JobNotFoundError,
    SubmissionRejectedError,
    SubmissionUnknownError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from receiver.providers import Provider
    from receiver.providers.jobapi import JobAPI
    from receiver.store import Engine, JobRow

log = structlog.get_logger(__name__)
ATTEMPTS = 4
"""Tries per request of one job (429 / 5xx / unreachable) before it is reported as failed."""
FIRST_WAIT = 1.0
STALE_SECONDS = 300.0
"""A claim still ``submitting`` after this long belongs to a replica that died: take it over."""
Status = Literal["submitted", "already_reprocessed", "not_reprocessable", "failed"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What reprocessing one job came to; ``detail`` says why when nothing new was submitted."""

    source: str
    job_id: str
    status: Status
    new_job_id: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"source": self.source, "job_id": self.job_id, "status": self.status}
        if self.new_job_id is not None:
            doc["new_job_id"] = self.new_job_id
        if self.detail is not None:
            doc["detail"] = self.detail
        return doc


class NotReprocessableError(Exception):
    """The provider's answer about the job lacks what a new submission needs."""


class Reprocessor:
    """Submits finished jobs again; ``cannot`` says why not without asking the provider."""

    def __init__(
        self,
        store: Engine,
        apis: Mapping[str, JobAPI],
        providers: Mapping[str, Provider],
        track: Callable[[Event], Awaitable[object]],
        *,
        owner: str,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.apis = apis
        self.providers = providers
        self._track = track
        self.owner = owner
        self._sleep = sleep

    def cannot(self, job: JobRow) -> str | None:
        """Why ``job`` cannot be submitted again, as far as jobhook knows; None when it can."""
        provider = self.providers.get(job.source)
        if provider is None:
            return f"source {job.source!r} is not configured"
        if provider.cannot_resubmit is not None:
            return provider.cannot_resubmit.format(name=provider.name)
        if job.source not in self.apis:
            return (
                f"{provider.name}: source {job.source!r} has no api_base_url and api_key "
                "to submit with"
            )
        if not State(job.state).terminal:
            return f"{provider.name}: job {job.job_id} is still {job.state}; it has not failed yet"
        return None

    async def reprocess(self, job: JobRow, *, force: bool = False) -> Outcome:
        """Submit ``job`` again unless it cannot be, or already was (and ``force`` is off)."""
        reason = self.cannot(job)
        if reason is not None:
            return Outcome(job.source, job.job_id, "not_reprocessable", detail=reason)
        now = time.time()
        claimed = await self.store.claim_reprocess(
            job.source, job.job_id, self.owner, now, stale_before=now - STALE_SECONDS, force=force
        )
        if not claimed:
            link = await self.store.reprocess_of(job.source, job.job_id)
            new_id = link.new_job_id if link is not None else None
            state = link.state if link is not None else "unknown"
            return Outcome(job.source, job.job_id, "already_reprocessed", new_id, state)
        origin = {"source": job.source, "job_id": job.job_id}
        metadata = {**job.metadata, "reprocessed_from": origin}
        try:
            new_id = await self._submit(self.apis[job.source], job, metadata)
        except NotReprocessableError as exc:
            await self._finish(job, None, str(exc))
            return Outcome(job.source, job.job_id, "not_reprocessable", detail=str(exc))
        except SubmissionUnknownError as exc:
            detail = f"{exc}: the job may exist at the provider; check, then reprocess with force"
            await self._finish(job, None, detail, unknown=True)
            log.warning("reprocess_unknown", source=job.source, job_id=job.job_id)
            return Outcome(job.source, job.job_id, "failed", detail=detail)
        except ProviderError as exc:
            await self._finish(job, None, str(exc))
            log.warning("reprocess_failed", source=job.source, job_id=job.job_id, error=str(exc))
            return Outcome(job.source, job.job_id, "failed", detail=str(exc))
        event = Event(source=job.source, job_id=new_id, state=State.QUEUED,
                      provider_status="tracked", via="track", metadata=metadata)  # fmt: skip
        try:  # tracked like POST /jobs: the webhook or the poller finishes it
            await self._track(event)
        finally:  # the link is kept even when tracking failed: the job exists at the provider
            await self._finish(job, new_id, None)
        log.info("job_reprocessed", source=job.source, job_id=job.job_id, new_job_id=new_id)
        return Outcome(job.source, job.job_id, "submitted", new_id)

    async def _submit(self, api: JobAPI, job: JobRow, metadata: dict[str, Any]) -> str:
        try:
            body = await self._retrying(lambda: api.job_body(job.job_id))
        except JobNotFoundError as exc:
            raise NotReprocessableError(
                f"{api.provider.name}: job {job.job_id} is gone from the provider"
            ) from exc
        submission = api.provider.resubmission(body, job_id=job.job_id, metadata=metadata)
        if isinstance(submission, str):
            raise NotReprocessableError(submission)
        new_id: str = await self._retrying(lambda: api.submit(submission))
        return new_id

    async def _retrying(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call``, again after a 429, 5xx or unreachable provider, ``ATTEMPTS`` times at most.

        A refused body, an unknown job and a timed-out submission (it may have been created)
        are not retried: asking again could not help, or could submit twice.
        """
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await call()
            except (JobNotFoundError, SubmissionRejectedError, SubmissionUnknownError):
                raise
            except ProviderError as exc:
                if attempt == ATTEMPTS:
                    raise
                # A 429's wait is already on the limiter; a 5xx backs off here too.
                wait = capped(exc.retry_after)
                if wait is None:
                    wait = FIRST_WAIT * 2 ** (attempt - 1)
                await self._sleep(min(wait, 30.0))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _finish(
        self, job: JobRow, new_id: str | None, error: str | None, *, unknown: bool = False
    ) -> None:
        await self.store.finish_reprocess(
            job.source, job.job_id, self.owner, time.time(),
            new_job_id=new_id, error=error, unknown=unknown,
        )  # fmt: skip
