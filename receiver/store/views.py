"""What the admin API reads from every store: job listings, deliveries, stats and the backlog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from receiver.store.base import JobRow


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


@dataclass(frozen=True, slots=True)
class Backlog:
    """Work not yet done, for gauges: completions resolving, dispatches by state."""

    resolving: int
    pending: int
    running: int
    dead: int
    oldest_pending_at: float | None
    """When the oldest completion still resolving, or dispatch still pending, was created."""
