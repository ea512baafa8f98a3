"""The store's logic, once for every backend: ``Engine`` and ``Reads`` over a connector.

Which statements each call runs and what it makes of their rows is written here and in the
shared SQL beside it (``sql``, ``queries``, ``history``, ...); writes of several statements are
the programs of ``programs``. A backend (``receiver.store.sqlite``, ``receiver.store.postgres``)
is a ``Connector``: its database, its migrations and its commit path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import (
    audit,
    bulk,
    circuits,
    codec,
    fields,
    history,
    programs,
    queries,
    reprocesses,
    sql,
)
from receiver.store.base import Store
from receiver.store.rows import AttemptRow, DeadGroup, DeadRow, ErrorBucket, TimeBucket

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry, AuditFilter, AuditRow
    from receiver.store.bulk import ReplayFilter
    from receiver.store.connector import Connector, WalStats
    from receiver.store.rows import (
        Backlog,
        CircuitRow,
        CompletionRow,
        DeliveryRow,
        DispatchRow,
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
    )


class SQLEngine(Store):
    """A ``Store`` over a ``Connector``: every method of the contract, for every backend."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self._read = connector.read
        self._execute = connector.execute
        self._write = connector.write
        self._bucket = bucket = connector.dialect.bucket
        self._completed_over_time = history.completed_over_time(bucket)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.connector!r})"

    async def open(self) -> None:
        await self.connector.open()

    async def close(self) -> None:
        await self.connector.close()

    async def ping(self) -> None:
        await self.connector.ping()

    async def durability(self) -> dict[str, object] | None:
        return await self.connector.durability()

    def wal_stats(self) -> WalStats | None:
        return self.connector.wal_stats()

    # The pipeline's writes

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True,
        audit: AuditEntry | None = None,
    ) -> IngestResult:  # fmt: skip
        return await self.connector.ingest(event, handlers, resolve, audit)

    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        until = now + lease_seconds
        return await self._write(programs.claim_completions, owner, limit, until, now)

    async def retry_completion(
        self, completion_id: int, owner: str, error: str, next_attempt_at: float
    ) -> None:
        await self._execute(sql.RETRY_COMPLETION, (error, next_attempt_at, completion_id, owner))

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        params = codec.resolution_params(completion_id, owner, resolution)
        rows = fields.insert_rows(completion_id, resolution.fields)
        return await self._write(programs.resolve_completion, params, completion_id, rows)

    async def claim_dispatches(
        self, owner: str, limit: int, lease_seconds: float, now: float, busy: Sequence[str] = ()
    ) -> list[tuple[DispatchRow, CompletionRow]]:
        until = now + lease_seconds
        return await self._write(programs.claim_dispatches, owner, limit, until, now, list(busy))

    async def finish_dispatch(
        self,
        dispatch_id: int,
        owner: str,
        *,
        error: str | None,
        next_attempt_at: float | None,
        error_code: str | None = None,
    ) -> None:
        params = codec.finish_params(dispatch_id, owner, error, next_attempt_at, error_code)
        await self._write(programs.finish_dispatch, params)

    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        params = circuits.failed_params(handler, threshold, cooldown, now)
        return await self._write(programs.circuit_failed, params)

    async def circuit_succeeded(self, handler: str, now: float) -> None:
        await self._execute(circuits.SUCCEEDED, (now, handler))

    async def circuit_probe_now(self, handler: str, now: float) -> None:
        await self._write(programs.circuit_probe_now, handler, now)

    async def renew(self, owner: str, lease_until: float) -> None:
        await self._write(programs.renew, owner, lease_until)

    async def release(self, owner: str) -> int:
        return await self._write(programs.release, owner)

    async def heartbeat(self, owner: str, now: float) -> None:
        await self._execute(sql.HEARTBEAT, (owner, now, now))

    async def take_back_stale(self, stale_before: float) -> int:
        return await self._write(programs.take_back_stale, stale_before)

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
        query, params = sql.replay_query(source, job_id, handler, since, include_succeeded)
        if audit is None:
            return await self._execute(query, params)
        return await self._write(programs.changed_audited, query, params, audit)

    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        query, params = bulk.chunk_query(f, after_id, limit)
        ids = [row[0] for row in await self._read(query, params)]
        if not ids:
            return 0, None
        requeue = bulk.requeue_query(len(ids))
        changed = await self._execute(requeue, (now, now, f.dispatch_state, *ids))
        return changed, ids[-1]

    async def schedule_poll(self, source: str, job_id: str, at: float, attempts: int) -> None:
        await self._execute(sql.SCHEDULE_POLL, (at, attempts, source, job_id))

    async def acquire_lease(self, name: str, owner: str, ttl: float, now: float) -> bool:
        return await self._write(programs.acquire_lease, name, owner, now + ttl, now)

    async def start_result_fetch(self, completion_id: int, now: float) -> bool:
        return await self._write(programs.start_result_fetch, completion_id, now)

    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        return await self._write(programs.purge, before, limit)

    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        if not completion_ids:
            return 0
        query = queries.forget_results_query(len(completion_ids))
        return await self._execute(query, list(completion_ids))

    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        params = reprocesses.claim_params(source, job_id, owner, now, stale_before, force)
        return await self._write(programs.claim_reprocess, params)

    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        state = reprocesses.state_of(new_job_id, unknown)
        params = (state, new_job_id, error, now, source, job_id, owner)
        await self._execute(reprocesses.FINISH, params)

    async def audit_start(self, entry: AuditEntry) -> int:
        return await self._write(programs.inserted_id, audit.INSERT, audit.insert_params(entry))

    async def audit_finish(
        self, audit_id: int, outcome: str, *, jobs: int | None, ref: str | None, now: float
    ) -> None:
        await self._execute(audit.FINISH, audit.finish_params(audit_id, outcome, jobs, ref, now))

    async def audit_refused(self, entry: AuditEntry, reason: str) -> None:
        await self._execute(audit.REFUSED, audit.refused_params(entry, reason))

    async def purge_audit(self, before: float, limit: int) -> int:
        return await self._execute(audit.PURGE, (before, limit))

    # The pipeline's reads

    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        rows = await self._read(sql.SELECT_JOB, (source, job_id))
        return codec.job_row(rows[0]) if rows else None

    async def next_due(self, busy: Sequence[str] = ()) -> float | None:
        return _first(await self._read(sql.NEXT_DUE, (list(busy), list(busy))))

    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        rows = await self._read(sql.DUE_POLLS, (source, now, limit))
        return [codec.job_row(r) for r in rows]

    async def next_poll_at(self) -> float | None:
        return _first(await self._read(sql.NEXT_POLL))

    async def circuits(self) -> list[CircuitRow]:
        return [circuits.circuit_row(r) for r in await self._read(circuits.LIST)]

    async def count_replayable(self, f: ReplayFilter) -> int:
        query, params = bulk.count_query(f)
        count: int = (await self._read(query, params))[0][0]
        return count

    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        rows = await self._read(reprocesses.OF_JOB, (source, job_id))
        return reprocesses.row(rows[0]) if rows else None

    async def confirmations_due(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in await self._read(queries.CONFIRMATIONS_DUE)}

    async def fields_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[FieldValue]]:
        return await fields.fields_of(self._read, keys)

    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        rows = await self._read(queries.DELIVERED_RESULTS, (limit,))
        return [(int(r[0]), str(r[1])) for r in rows]

    # Reads: what the admin API and the console show

    async def audit_rows(
        self, f: AuditFilter, *, after_id: int | None, limit: int
    ) -> list[AuditRow]:
        query, params = audit.list_query(f, after_id, limit)
        return [audit.row(r) for r in await self._read(query, params)]

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobKey | None = None
    ) -> list[JobListing]:
        query, params = queries.list_jobs_query(where, limit, after)
        return [queries.listing_row(r) for r in await self._read(query, params)]

    async def deliveries_for(self, source: str, job_id: str) -> list[DeliveryRow]:
        rows = await self._read(queries.SELECT_DELIVERIES, (source, job_id))
        return [queries.delivery_row(r) for r in rows]

    async def dispatches_for(self, source: str, job_id: str) -> list[DispatchRow]:
        rows = await self._read(sql.SELECT_DISPATCHES_FOR, (source, job_id))
        return [codec.dispatch_row(r) for r in rows]

    async def completion_for(self, source: str, job_id: str) -> CompletionRow | None:
        rows = await self._read(sql.SELECT_COMPLETION_FOR, (source, job_id))
        return codec.completion_row(rows[0]) if rows else None

    async def job_stats(self, since: float, *, sources: Sequence[str] | None = None) -> JobStats:
        return await queries.job_stats(self._read, since, sources)

    async def field_names(self, where: JobFilter, limit: int) -> list[str]:
        query, params = queries.field_names_query(where, limit)
        return [str(r[0]) for r in await self._read(query, params)]

    async def field_stats(
        self, since: float, thresholds: Mapping[str, float], default: float, *,
        sources: Sequence[str] | None = None,
    ) -> FieldStats:  # fmt: skip
        return await fields.field_stats(self._read, since, thresholds, default, sources)

    async def completions_after(
        self, after_id: int, limit: int, *, sources: Sequence[str] | None = None
    ) -> list[CompletionRow]:
        query, params = queries.completions_after_query(after_id, limit, sources)
        rows = await self._read(query, params, in_commit_order=True)
        return [codec.completion_row(r) for r in rows]

    async def last_completion_id(self) -> int:
        ((last,),) = await self._read(queries.LAST_COMPLETION_ID, in_commit_order=True)
        return int(last)

    async def attempts_for(self, source: str, job_id: str) -> list[AttemptRow]:
        return [AttemptRow(*r) for r in await self._read(history.ATTEMPTS_FOR, (source, job_id))]

    async def completed_over_time(self, since: float, width: float) -> list[TimeBucket]:
        rows = await self._read(self._completed_over_time, (width, since))
        return [TimeBucket(r[0] * width, r[1], r[2], r[3]) for r in rows]

    async def outcomes_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[OutcomeBucket]:
        query = history.outcomes_over_time(self._bucket, sources)
        rows = await self._read(query, history.over_time_params(width, since, sources))
        return [history.outcome_bucket(r, width) for r in rows]

    async def errors_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[ErrorBucket]:
        query = history.errors_over_time(self._bucket, sources)
        rows = await self._read(query, history.over_time_params(width, since, sources, 2))
        return [ErrorBucket(r[0] * width, r[1], r[2]) for r in rows]

    async def dead_groups(self, *, sources: Sequence[str] | None = None) -> list[DeadGroup]:
        return [DeadGroup(*r) for r in await self._read(*history.dead_groups_query(sources))]

    async def dead_list(
        self, handler: str | None, code: str | None, limit: int, *,
        sources: Sequence[str] | None = None,
    ) -> list[DeadRow]:  # fmt: skip
        rows = await self._read(*history.dead_list_query(handler, code, limit, sources))
        return [DeadRow(*r) for r in rows]

    async def backlog(self) -> Backlog:
        (row,) = await self._read(queries.BACKLOG)
        return queries.backlog_row(row)

    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        rows = await self._read(reprocesses.FROM_JOB, (source, new_job_id))
        return reprocesses.row(rows[0]) if rows else None

    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        if not job_ids:
            return {}
        rows = await self._read(reprocesses.of_jobs(len(job_ids)), (source, *job_ids))
        return {r.job_id: r for r in map(reprocesses.row, rows)}


def _first(rows: list[Any]) -> float | None:
    return rows[0][0] if rows and rows[0][0] is not None else None
