"""What every store returns: jobs, completions, dispatches and how a result was resolved, and
what the admin API reads (job listings with the filter and key that select them, deliveries,
stats and the backlog)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from receiver.models import State


@dataclass(frozen=True, slots=True)
class JobRow:
    source: str
    job_id: str
    state: str
    provider_status: str
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    last_news_at: float
    terminal_at: float | None
    progress_done: int | None
    progress_total: int | None
    expected_pages: int | None
    error: str | None
    poll_attempts: int = 0


@dataclass(frozen=True, slots=True)
class CompletionRow:
    id: int
    source: str
    job_id: str
    state: str
    provider_status: str
    metadata: dict[str, Any]
    error: str | None
    created_at: float
    phase: str
    result_path: str | None
    result_sha256: str | None
    result_bytes: int | None
    attempts: int
    result_ref: str | None = None
    traceparent: str | None = None
    """The W3C trace context the completion was stored under (None: tracing was off)."""
    resolved_at: float | None = None
    resolve_seconds: float | None = None
    """How long the attempt that resolved it took to confirm and fetch (None before)."""
    error_code: str | None = None
    """The provider's error code (or jobhook's own when the result could not be had)."""


@dataclass(frozen=True, slots=True)
class DispatchRow:
    id: int
    completion_id: int
    handler: str
    state: str
    attempts: int
    next_attempt_at: float
    last_error: str | None
    updated_at: float
    error_code: str | None = None
    """The last failed attempt's normalised code (``http_5xx``, ``handler_exception``...)."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a completion's result was resolved: a file under results.dir, or an error."""

    result_path: str | None = None
    result_sha256: str | None = None
    result_bytes: int | None = None
    error: str | None = None
    state: State | None = None
    provider_status: str | None = None
    confidence: float | None = None
    """The job-level confidence the result reports (its least confident field), if any."""
    error_code: str | None = None
    """The provider's error code when its job API reports one, else jobhook's own
    (``result_too_large``, ``confirm_timeout``...) when the result could not be had."""
    error_where: str | None = None
    """Where the error arose: ``provider`` (the job failed there) or ``fetch`` (jobhook's side)."""
    fields: tuple[FieldValue, ...] = ()
    """The result's extracted fields with their confidence (at most ``MAX_FIELDS``)."""
    seconds: float | None = None
    """How long confirming and fetching took (the successful attempt, wall clock)."""


@dataclass(frozen=True, slots=True)
class FieldValue:
    """One extracted field of a result: its confidence (0..1) and its value as text, if any."""

    field: str
    confidence: float | None
    value: str | None


@dataclass(frozen=True, slots=True)
class FieldStat:
    """One field's confidences over a period: how many, mean, 10th percentile, how many below
    the source's threshold."""

    source: str
    field: str
    count: int
    mean: float
    p10: float
    below: int
    threshold: float


@dataclass(frozen=True, slots=True)
class FieldStats:
    """Confidence figures of jobs created since a time."""

    avg_confidence: float | None
    """The mean of the job-level confidences (each job's least confident field)."""
    fields: tuple[FieldStat, ...]


@dataclass(frozen=True, slots=True)
class ReprocessRow:
    """A finished job submitted again at its provider: the claim, then the new job's id."""

    source: str
    job_id: str
    state: str
    """``submitting``, ``submitted`` or ``failed`` (claimable again)."""
    new_job_id: str | None
    attempts: int
    error: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    """One webhook delivery of a job, as first received (a resend of it is not a new row)."""

    message_id: str
    state: str
    provider_status: str
    received_at: float


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs the admin API lists or exports; every field left None matches all."""

    source: str | None = None
    job_id: str | None = None
    state: str | None = None
    created_after: float | None = None
    created_before: float | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    """(key, value) pairs the job's metadata must hold; values compare as text."""
    min_confidence: float | None = None
    error_code: str | None = None
    """The job's normalised error code, or the last failure code of any of its dispatches."""
    field: str | None = None
    """Jobs whose result has this extracted field (with ``max_confidence``: that weak or weaker)."""
    max_confidence: float | None = None
    oldest_first: bool = False
    """List oldest first (keyset paging runs forward from ``after``); newest first otherwise."""
    sources: tuple[str, ...] | None = None
    """Only jobs of these sources (the caller's token is limited to them); None: any source.
    Unlike ``source``, which the caller chooses, this is who the caller is."""


JobKey = tuple[float, str, str]
"""A job's place in listings, newest first: (created_at, source, job_id)."""


@dataclass(frozen=True, slots=True)
class JobListing:
    """A job as listed, with what its completion holds (None while it has none)."""

    job: JobRow
    phase: str | None = None
    confidence: float | None = None
    result_path: str | None = None
    result_sha256: str | None = None
    result_bytes: int | None = None
    error_code: str | None = None
    """The provider's error code, as the job's news or its confirming job API call gave it."""
    failure_code: str | None = None
    """The job's normalised error code: the provider's, or jobhook's own (``provider_failed``,
    ``result_too_large``...); None when nothing failed."""
    failure_where: str | None = None
    """``provider`` or ``fetch``, beside ``failure_code``."""
    failure_message: str | None = None

    @property
    def key(self) -> JobKey:
        return (self.job.created_at, self.job.source, self.job.job_id)


@dataclass(frozen=True, slots=True)
class JobStats:
    """Counts over jobs created since a time; durations are created_at to terminal_at."""

    total: int
    by_state: dict[str, int]
    by_source: dict[str, int]
    terminal: int
    succeeded: int
    durations: int
    """How many terminal jobs the duration figures cover."""
    avg_seconds: float | None
    p50_seconds: float | None
    p95_seconds: float | None
    handler_failures: dict[str, dict[str, int]]
    """Per handler: ``dead`` dispatches and ``retrying`` ones (pending after a failure)."""
    errors: tuple[ErrorCount, ...] = ()
    """Failed jobs and failing dispatches, counted by code, where, source and handler."""


@dataclass(frozen=True, slots=True)
class ErrorCount:
    """How many failures share a code, a place (provider, fetch, handler), a source and handler."""

    code: str
    where: str
    source: str
    handler: str | None
    count: int


@dataclass(frozen=True, slots=True)
class CircuitRow:
    """A handler's circuit: ``closed``, ``open`` (until ``retry_at``) or ``half_open``."""

    handler: str
    state: str
    failures: int
    """Consecutive failed attempts."""
    opened_at: float | None
    retry_at: float | None
    """When an open circuit lets its probe through (or a half-open one's probe lease ends)."""


@dataclass(frozen=True, slots=True)
class Backlog:
    """Work not yet done, for gauges: completions resolving, dispatches by state."""

    resolving: int
    pending: int
    running: int
    dead: int
    oldest_pending_at: float | None
    """When the oldest completion still resolving, or dispatch still pending, was created."""


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """One handler attempt as it ended: ``succeeded``, ``retry`` (at ``next_attempt_at``) or
    ``dead``."""

    handler: str
    attempt: int
    outcome: str
    error: str | None
    error_code: str | None
    next_attempt_at: float | None
    ended_at: float


@dataclass(frozen=True, slots=True)
class TimeBucket:
    """Jobs that became terminal in ``[start, start + width)``, and how long they took."""

    start: float
    completed: int
    avg_seconds: float | None
    max_seconds: float | None


@dataclass(frozen=True, slots=True)
class OutcomeBucket:
    """Jobs that became terminal in ``[start, start + width)``: how many, how many succeeded
    and failed, and the p50 and p95 of their known-to-terminal seconds (nearest rank)."""

    start: float
    completed: int
    succeeded: int
    failed: int
    p50_seconds: float | None
    p95_seconds: float | None


@dataclass(frozen=True, slots=True)
class ErrorBucket:
    """Errors with one code in ``[start, start + width)``: failed jobs and handler attempts."""

    start: float
    code: str
    count: int


@dataclass(frozen=True, slots=True)
class DeadGroup:
    """Dead deliveries of one handler with one error code (``unknown`` without one)."""

    handler: str
    error_code: str
    count: int
    last_at: float


@dataclass(frozen=True, slots=True)
class DeadRow:
    """One dead delivery: the job, the handler, its attempts and its last error."""

    source: str
    job_id: str
    handler: str
    attempts: int
    last_error: str | None
    error_code: str
    updated_at: float
