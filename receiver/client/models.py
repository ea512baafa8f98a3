"""The admin API's documents as typed, read-only models.

Fields the service adds later are kept (``extra="allow"``) rather than refused, so an older
client keeps working against a newer service. Times are timezone-aware datetimes in UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

State = Literal["queued", "running", "succeeded", "partial", "failed", "cancelled", "expired"]
TERMINAL_STATES: frozenset[str] = frozenset(
    {"succeeded", "partial", "failed", "cancelled", "expired"}
)


class Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Progress(Model):
    done: int | None = None
    total: int | None = None


class ResultInfo(Model):
    """The stored result: its sha256, size, and whether the file is still on disk."""

    sha256: str
    bytes: int | None = None
    available: bool = False


class Failure(Model):
    """A job's normalised error: ``code``, a bounded ``message``, and ``where`` it arose."""

    code: str
    message: str | None = None
    where: str | None = None


class ReprocessLink(Model):
    """One end of a reprocess: the other job and how its submission went."""

    source: str
    job_id: str | None = None
    state: str
    attempts: int = 0
    error: str | None = None
    at: datetime | None = None


class Job(Model):
    """One job as the service knows it; ``terminal`` once it will not change state again."""

    source: str
    job_id: str
    state: State
    provider_status: str | None = None
    terminal: bool = False
    metadata: dict[str, Any] = {}
    error: str | None = None
    error_code: str | None = None
    progress: Progress | None = None
    expected_pages: int | None = None
    created_at: datetime
    updated_at: datetime | None = None
    terminal_at: datetime | None = None
    processing_seconds: float | None = None
    confidence: float | None = None
    result: ResultInfo | None = None
    failure: Failure | None = None
    fields: dict[str, float | None] = {}
    """Each extracted field's confidence (in a job's detail; empty in listings)."""
    reprocessed_as: ReprocessLink | None = None
    reprocessed_from: ReprocessLink | None = None

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"


class Tracked(Model):
    """``POST /jobs``'s answer."""

    status: str
    job: Job


class Replayed(Model):
    """``POST /jobs/{source}/{job_id}/replay``'s answer: how many deliveries were queued."""

    requeued: int


class Delivery(Model):
    message_id: str
    state: str
    provider_status: str | None = None
    received_at: datetime | None = None


class Resolution(Model):
    """The job's completion as stored: its phase, and the result once fetched."""

    id: int
    state: str
    provider_status: str | None = None
    phase: str
    error: str | None = None
    created_at: datetime
    resolve_attempts: int = 0
    resolved_at: datetime | None = None
    resolve_seconds: float | None = None
    trace_id: str | None = None
    result: ResultInfo | None = None


class Dispatch(Model):
    """One handler's delivery of the completion: its state, attempts and last error."""

    handler: str
    state: str
    attempts: int = 0
    last_error: str | None = None
    error_code: str | None = None
    next_attempt_at: datetime | None = None
    updated_at: datetime | None = None


class JobDetail(Model):
    """``GET /jobs/{source}/{job_id}`` (and what ``wait`` returns)."""

    job: Job
    deliveries: list[Delivery] = []
    completion: Resolution | None = None
    dispatches: list[Dispatch] = []


class Page(Model):
    """One page of ``GET /jobs``, newest first; ``next_cursor`` is None on the last."""

    jobs: list[Job]
    next_cursor: str | None = None


class AuditEntry(Model):
    """One audit record: an admin action (``attempts`` 1), or refusals from one address for one
    reason counted together between ``at`` and ``last_at``."""

    id: int
    at: float
    last_at: float
    token: str
    role: str
    action: str
    target: str
    jobs: int | None = None
    outcome: str
    ref: str | None = None
    request_id: str
    client: str
    attempts: int = 1


class AuditPage(Model):
    """One page of ``GET /audit``, newest first; ``next_cursor`` is None on the last."""

    entries: list[AuditEntry]
    next_cursor: str | None = None


class Completion(Model):
    """A job that became terminal, as ``GET /events`` announces it; ``id`` only grows."""

    id: int
    source: str
    job_id: str
    state: State
    provider_status: str | None = None
    metadata: dict[str, Any] = {}
    error: str | None = None
    created_at: datetime
    trace_id: str | None = None


class Durations(Model):
    count: int = 0
    avg: float | None = None
    p50: float | None = None
    p95: float | None = None


class ErrorBreakdown(Model):
    total: int = 0
    by_code: dict[str, int] = {}
    by_where: dict[str, int] = {}
    by_source: dict[str, dict[str, int]] = {}
    by_handler: dict[str, dict[str, int]] = {}


class FieldStat(Model):
    source: str
    field: str
    count: int
    mean: float
    p10: float
    below: float
    threshold: float


class Stats(Model):
    """``GET /jobs/stats``: the period's jobs by state and source, timings, errors, fields."""

    period: str
    since: datetime
    total: int
    by_state: dict[str, int] = {}
    by_source: dict[str, int] = {}
    terminal: int = 0
    success_rate: float | None = None
    processing_seconds: Durations = Durations()
    handler_failures: dict[str, Any] = {}
    errors: ErrorBreakdown = ErrorBreakdown()
    circuits: dict[str, dict[str, Any]] = {}
    avg_confidence: float | None = None
    fields: list[FieldStat] = []


class ReprocessOutcome(Model):
    """What reprocessing one job came to; ``new_job_id`` when it was submitted again."""

    source: str
    job_id: str
    status: Literal["submitted", "already_reprocessed", "not_reprocessable", "failed"]
    new_job_id: str | None = None
    detail: str | None = None
