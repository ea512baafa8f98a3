"""The canonical vocabulary every provider is translated into: states, events, completions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

Via = Literal["webhook", "poll", "track", "list"]


class State(StrEnum):
    """Canonical job states; the provider's own word is always kept beside them."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def terminal(self) -> bool:
        return self not in (State.QUEUED, State.RUNNING)

    @property
    def rank(self) -> int:
        """Order used to keep state forward-only: queued < running < any terminal state."""
        if self is State.QUEUED:
            return 0
        if self is State.RUNNING:
            return 1
        return 2


TERMINAL_STATES = frozenset(s for s in State if s.terminal)


@dataclass(frozen=True, slots=True)
class Progress:
    """Pages processed out of the total, when the provider reports them."""

    done: int | None = None
    total: int | None = None


@dataclass(frozen=True, slots=True)
class ResultRef:
    """Where a finished job's result is: inline JSON, or a (presigned) URL to download."""

    inline: Any = None
    url: str | None = None
    sha256: str | None = None
    assemble: str | None = None
    """A result the job API assembles from several calls (``JobAPI.write_result``): the
    provider's name for it (Textract: the ``Get*`` API whose pages make it)."""
    single_use: bool = False
    """The provider serves this result once: jobhook requests it at most once, even across
    restarts."""


@dataclass(frozen=True, slots=True)
class Event:
    """One piece of news about a job, from a webhook, a poll or a registration."""

    source: str
    job_id: str
    state: State
    provider_status: str
    via: Via
    message_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    progress: Progress | None = None
    expected_pages: int | None = None
    result: ResultRef | None = None
    """Set when the news already carries the result (a poll), so it need not be asked again."""
    poll_at: float | None = None
    """When the poller should ask about the job if no news comes first (None: leave as is)."""
    error_code: str | None = None
    """The provider's machine-readable error code (``DOCUMENT_CORRUPT``), beside its text."""
    traceparent: str | None = None
    """The W3C trace context of the span that brought the news, kept with the completion."""

    def traced(self, traceparent: str | None) -> Event:
        """This event under ``traceparent`` (cheaper per webhook than ``dataclasses.replace``)."""
        return _event(*self.__reduce__()[1][:-1], traceparent)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled for the SQLite writer process, once per webhook: the fields as they are,
        # not the generic frozen-dataclass state, which costs twice as much a round trip.
        return (_event, (self.source, self.job_id, self.state.value, self.provider_status,
                         self.via, self.message_id, self.metadata, self.error, self.progress,
                         self.expected_pages, self.result, self.poll_at,
                         self.error_code, self.traceparent))  # fmt: skip


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What the store did with an event: ``duplicate`` when its message id was seen before."""

    status: Literal["accepted", "duplicate"]
    job_id: str
    state: State
    completed: bool = False
    requeued: int = 0
    took: float | None = None
    """For an event that completed its job: seconds from the job's first news to its terminal
    state (what the job metrics observe, without reading the job again)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_ingest_result, (self.status, self.job_id, self.state.value, self.completed,
                                 self.requeued, self.took))  # fmt: skip


_STATES = {state.value: state for state in State}


def _event(source: str, job_id: str, state: str, *rest: Any) -> Event:
    return Event(source, job_id, _STATES[state], *rest)


def _ingest_result(
    status: Literal["accepted", "duplicate"], job_id: str, state: str, *rest: Any
) -> IngestResult:
    return IngestResult(status, job_id, _STATES[state], *rest)
