"""The store contract every backend (SQLite, PostgreSQL) fulfils, in two parts: the ``Engine``
the pipeline runs on and the ``Reads`` the admin API and the console show; a ``Store`` is both.
What they return is in ``rows``."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry, AuditFilter, AuditRow
    from receiver.store.bulk import ReplayFilter
    from receiver.store.connector import WalStats
    from receiver.store.rows import (
        AttemptRow,
        Backlog,
        CircuitRow,
        CompletionRow,
        DeadGroup,
        DeadRow,
        DeliveryRow,
        DispatchRow,
        ErrorBucket,
        FieldStats,
        FieldValue,
        JobFilter,
        JobKey,
        JobListing,
        JobRow,
        JobStats,
        OutcomeBucket,
        ReprocessRow,
        Resolution,
        TimeBucket,
    )


class Engine(abc.ABC):
    """Durable state the pipeline runs on: jobs, webhook deliveries, completions, handler
    dispatches and their circuits, leases, polls, retention and reprocess links.

    Every method raises StoreUnavailableError when the backend cannot read or commit.
    """

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Finish queued writes and disconnect."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailableError unless the store answers a trivial query."""

    async def durability(self) -> dict[str, object] | None:
        """How durable a commit is beyond this server (replication), or None where the
        backend has nothing to add (SQLite: the file is the store)."""
        return None

    def wal_stats(self) -> WalStats | None:
        """A SQLite store's checkpoint figures (``WalStats``), for the metrics; None for a
        backend that checkpoints on its own (PostgreSQL's server does)."""
        return None

    @abc.abstractmethod
    async def ingest(
        self,
        event: Event,
        handlers: Sequence[str],
        *,
        resolve: bool = True,
        audit: AuditEntry | None = None,
    ) -> IngestResult:
        """Record an event in one transaction (with ``audit``, an admin call's, its audit row
        finished, ``audit.done``, in the same transaction).

        The delivery (unique per source and message id), the job's state (forward-only) and,
        when the job newly becomes terminal, its completion plus one dispatch per handler
        named in ``handlers``; with ``resolve`` False the completion needs no confirmation
        and its dispatches are claimable at once. A seen message id is a duplicate and changes
        nothing, except that dead dispatches of the job's completion are queued again (a resend
        is a replay).
        """

    @abc.abstractmethod
    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        """One job, or None."""

    @abc.abstractmethod
    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        """Lease completions whose result still has to be resolved."""

    @abc.abstractmethod
    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        """Store a completion's result and make its dispatches claimable; False (and nothing
        stored) when ``owner`` no longer holds the completion's lease."""

    @abc.abstractmethod
    async def retry_completion(
        self, completion_id: int, owner: str, error: str, next_attempt_at: float
    ) -> None:
        """Give a leased completion back, to resolve again at ``next_attempt_at``."""

    @abc.abstractmethod
    async def claim_dispatches(
        self, owner: str, limit: int, lease_seconds: float, now: float, busy: Sequence[str] = ()
    ) -> list[tuple[DispatchRow, CompletionRow]]:
        """Lease due dispatches of resolved completions (and ones whose lease expired), none of
        the ``busy`` handlers' (at their concurrency limit: theirs stay pending, unspent)."""

    @abc.abstractmethod
    async def finish_dispatch(
        self,
        dispatch_id: int,
        owner: str,
        *,
        error: str | None,
        next_attempt_at: float | None,
        error_code: str | None = None,
    ) -> None:
        """Record an attempt: success (no error), a retry at ``next_attempt_at``, or dead;
        a failure's normalised ``error_code`` is kept beside its message."""

    @abc.abstractmethod
    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        """Count a failed attempt of ``handler``; at ``threshold`` in a row (or when a probe
        fails) its circuit opens for ``cooldown`` seconds. Returns the circuit's state."""

    @abc.abstractmethod
    async def circuit_succeeded(self, handler: str, now: float) -> None:
        """A delivery of ``handler`` succeeded: its circuit closes and its count starts over."""

    @abc.abstractmethod
    async def circuit_probe_now(self, handler: str, now: float) -> None:
        """An open circuit of ``handler`` lets its one probe through at the next claim instead
        of at the end of its cool-down (an operator replayed a delivery); else nothing."""

    @abc.abstractmethod
    async def circuits(self) -> list[CircuitRow]:
        """Every handler's circuit that has ever counted a failure."""

    @abc.abstractmethod
    async def renew(self, owner: str, lease_until: float) -> None:
        """Extend every lease ``owner`` holds (work that runs longer than a lease)."""

    @abc.abstractmethod
    async def release(self, owner: str) -> int:
        """Give back every lease ``owner`` holds, so another worker can take the work now."""

    @abc.abstractmethod
    async def heartbeat(self, owner: str, now: float) -> None:
        """Record that replica ``owner`` is alive at ``now``."""

    @abc.abstractmethod
    async def take_back_stale(self, stale_before: float) -> int:
        """Free every claim of replicas last heard of before ``stale_before``; how many."""

    @abc.abstractmethod
    async def next_due(self, busy: Sequence[str] = ()) -> float | None:
        """When the earliest pending completion or dispatch falls due, or None if none is;
        the ``busy`` handlers' dispatches left out, as ``claim_dispatches`` leaves them."""

    @abc.abstractmethod
    async def replay(
        self,
        *,
        source: str | None = None,
        job_id: str | None = None,
        handler: str | None = None,
        since: float | None = None,
        include_succeeded: bool = False,
        audit: AuditEntry | None = None,
    ) -> int:
        """Queue dead (or, with include_succeeded, also finished) dispatches again, in one
        transaction (with ``audit``, the call's audit row, finished, in it)."""

    @abc.abstractmethod
    async def count_replayable(self, f: ReplayFilter) -> int:
        """How many dispatches a bulk replay of ``f`` would requeue now."""

    @abc.abstractmethod
    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        """Requeue the next ``limit`` dispatches of ``f`` with an id above ``after_id``, in one
        short transaction: (how many were requeued, the last id looked at or None when done)."""

    @abc.abstractmethod
    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        """Non-terminal jobs of ``source`` whose next poll is due, earliest first."""

    @abc.abstractmethod
    async def next_poll_at(self) -> float | None:
        """When the earliest poll of any non-terminal job falls due."""

    @abc.abstractmethod
    async def schedule_poll(self, source: str, job_id: str, at: float, attempts: int) -> None:
        """Set a non-terminal job's next poll time and attempt count."""

    @abc.abstractmethod
    async def acquire_lease(self, name: str, owner: str, ttl: float, now: float) -> bool:
        """Take or extend the named lease (e.g. poller leadership); False while another holds it."""

    @abc.abstractmethod
    async def start_result_fetch(self, completion_id: int, now: float) -> bool:
        """Durably record that the completion's single-use result is being requested; False
        when that was recorded before (the result may be gone: it must not be asked again)."""

    @abc.abstractmethod
    async def fields_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[FieldValue]]:
        """The extracted fields (confidence, value) of these (source, job_id) jobs, by job."""

    @abc.abstractmethod
    async def confirmations_due(self) -> dict[str, int]:
        """By source, completions still waiting for their job API's confirmation."""

    @abc.abstractmethod
    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        """Delete up to ``limit`` delivered jobs that became terminal before ``before``.

        A job goes with its deliveries, completion and dispatches, and only when its completion
        is resolved and every dispatch succeeded (none touched since ``before``). Returns how
        many jobs went, and their result files, for the caller to delete.
        """

    @abc.abstractmethod
    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        """(completion id, result path) of results that every dispatch has delivered."""

    @abc.abstractmethod
    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        """Clear the result of these completions (their files are gone); return how many."""

    @abc.abstractmethod
    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        """Claim the right to submit a job again; False when it is being or was submitted, or
        its submission's outcome is unknown (unless ``force``). A claim left ``submitting``
        since before ``stale_before`` (its replica died) can be taken over, and so can one that
        ``failed``."""

    @abc.abstractmethod
    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        """Record a claimed submission's outcome: the new job's id, or the error (claimable
        again; with ``unknown``, the job may exist at the provider: only ``force`` claims it)."""

    @abc.abstractmethod
    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        """The reprocess link of an old job, if it was ever claimed."""

    @abc.abstractmethod
    async def audit_start(self, entry: AuditEntry) -> int:
        """Record an admin action before its effect (outcome ``started``), or one that ended
        without its effect's transaction recording it (its outcome); its row's id."""

    @abc.abstractmethod
    async def audit_finish(
        self, audit_id: int, outcome: str, *, jobs: int | None, ref: str | None, now: float
    ) -> None:
        """Record a started action's outcome and how many jobs it touched."""

    @abc.abstractmethod
    async def audit_refused(self, entry: AuditEntry, reason: str) -> None:
        """Count a refused attempt on the row of its address, reason, token, action and hour."""

    @abc.abstractmethod
    async def purge_audit(self, before: float, limit: int) -> int:
        """Delete up to ``limit`` audit rows last touched before ``before`` that name no job
        still kept; return how many."""


class Reads(abc.ABC):
    """What the admin API and the console read: listings, a job's history, stats and charts.

    Every method raises StoreUnavailableError when the backend cannot read.
    """

    @abc.abstractmethod
    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobKey | None = None
    ) -> list[JobListing]:
        """Up to ``limit`` jobs matching ``where``, newest first, strictly after ``after``."""

    @abc.abstractmethod
    async def deliveries_for(self, source: str, job_id: str) -> list[DeliveryRow]:
        """A job's webhook deliveries, oldest first."""

    @abc.abstractmethod
    async def dispatches_for(self, source: str, job_id: str) -> list[DispatchRow]:
        """Every dispatch of a job's completion."""

    @abc.abstractmethod
    async def completion_for(self, source: str, job_id: str) -> CompletionRow | None:
        """A job's completion, or None while it is not terminal."""

    @abc.abstractmethod
    async def job_stats(self, since: float, *, sources: Sequence[str] | None = None) -> JobStats:
        """Totals, states, sources, durations and handler failures of jobs created since (of
        ``sources`` only, when given: a token limited to them; likewise below)."""

    @abc.abstractmethod
    async def field_names(self, where: JobFilter, limit: int) -> list[str]:
        """The distinct extracted fields of the jobs ``where`` selects, alphabetical."""

    @abc.abstractmethod
    async def field_stats(
        self,
        since: float,
        thresholds: Mapping[str, float],
        default: float,
        *,
        sources: Sequence[str] | None = None,
    ) -> FieldStats:
        """Per (source, field) confidence figures of jobs created since; ``thresholds`` by
        source (``default`` for the others) decide what counts as ``below``."""

    @abc.abstractmethod
    async def completions_after(
        self, after_id: int, limit: int, *, sources: Sequence[str] | None = None
    ) -> list[CompletionRow]:
        """Completions with an id above ``after_id``, in id order (the event stream)."""

    @abc.abstractmethod
    async def last_completion_id(self) -> int:
        """The highest completion id so far, 0 when there is none."""

    @abc.abstractmethod
    async def attempts_for(self, source: str, job_id: str) -> list[AttemptRow]:
        """Every handler attempt of a job's completion as it ended, oldest first."""

    @abc.abstractmethod
    async def completed_over_time(self, since: float, width: float) -> list[TimeBucket]:
        """Jobs that became terminal since ``since``, per bucket of ``width`` seconds (buckets
        with none are left out), oldest first."""

    @abc.abstractmethod
    async def outcomes_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[OutcomeBucket]:
        """Jobs that became terminal since ``since`` per bucket of ``width`` seconds: how many
        succeeded and failed, p50 and p95 seconds from known to terminal; empty buckets left
        out, oldest first."""

    @abc.abstractmethod
    async def errors_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[ErrorBucket]:
        """Failed jobs (by their failure code) and failed handler attempts (by theirs, else
        ``unknown``) since ``since``, per bucket of ``width`` seconds and code, oldest first."""

    @abc.abstractmethod
    async def dead_groups(self, *, sources: Sequence[str] | None = None) -> list[DeadGroup]:
        """Dead dispatches counted by handler and error code, most first."""

    @abc.abstractmethod
    async def dead_list(
        self,
        handler: str | None,
        code: str | None,
        limit: int,
        *,
        sources: Sequence[str] | None = None,
    ) -> list[DeadRow]:
        """Up to ``limit`` dead dispatches (of ``handler``, with ``code``, when given), newest
        first."""

    @abc.abstractmethod
    async def backlog(self) -> Backlog:
        """Work not yet delivered, counted now."""

    @abc.abstractmethod
    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        """The link whose submission created ``new_job_id``, if any."""

    @abc.abstractmethod
    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        """The links of several old jobs of one source, by job id."""

    @abc.abstractmethod
    async def audit_rows(
        self, f: AuditFilter, *, after_id: int | None, limit: int
    ) -> list[AuditRow]:
        """Audit rows the filter selects, newest first, from before ``after_id`` if given."""


class Store(Engine, Reads):
    """A backend: the engine and its reads over one database (``receiver.store.open_store``)."""
