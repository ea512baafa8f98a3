"""The shared store for several replicas: PostgreSQL through an asyncpg pool.

Each write is one transaction on a pooled connection, except webhooks: their ingests are
grouped, a batch stored by one function call and one commit
(``receiver.store.postgres.group_commit``), a few batches in flight at once. Constraints and row
locks do what the SQLite store's single writer does: a message id is accepted once however many
replicas race for it, and claims use ``FOR UPDATE SKIP LOCKED`` so two replicas never lease the
same work."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from receiver.store import (
    audit,
    bulk,
    circuits,
    codec,
    fields,
    history,
    queries,
    reprocesses,
    sql,
)
from receiver.store.base import Store
from receiver.store.postgres import durability
from receiver.store.postgres import sql as pg_sql
from receiver.store.postgres.group_commit import IN_FLIGHT, PgGroupCommit
from receiver.store.postgres.ingest import audited
from receiver.store.postgres.migrations import migrate
from receiver.store.postgres.pool import PgPool, affected
from receiver.store.rows import AttemptRow, DeadGroup, DeadRow, ErrorBucket, TimeBucket

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry, AuditFilter, AuditRow
    from receiver.store.bulk import ReplayFilter
    from receiver.store.postgres.durability import Durability
    from receiver.store.postgres.pool import Conn
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

_n = pg_sql.numbered
_AUDIT_INSERT = _n(audit.INSERT)
_AUDIT_FINISH = _n(audit.FINISH)
_AUDIT_REFUSED = _n(audit.REFUSED)
_AUDIT_PURGE = _n(audit.PURGE)
DURABILITY_RECHECK_SECONDS = 30.0


class PostgresStore(Store):
    """PostgreSQL, for several replicas of one service sharing one database."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        require_synchronous_replication: bool = False,
    ) -> None:
        self._db = PgPool(url, min_size=min_size, max_size=max_size, timeout=timeout)
        self._require_sync = require_synchronous_replication
        self._durability: Durability | None = None
        self._durability_at = 0.0
        self.batching = PgGroupCommit(self._db, in_flight=min(IN_FLIGHT, max_size))
        """Ingests are stored a batch at a time (``receiver.store.postgres.group_commit``)."""

    def __repr__(self) -> str:
        return f"PostgresStore({self._db.display_url!r})"

    async def open(self) -> None:
        await self._db.open(self._setup)
        self.batching.start()

    async def _setup(self, conn: Conn) -> None:
        await migrate(conn)
        self._durability = await durability.read(conn)
        self._durability_at = time.monotonic()
        durability.report(self._durability, require_synchronous=self._require_sync)

    async def durability(self) -> dict[str, object] | None:
        # Read again now and then: after a failover the server and its standbys have changed.
        if time.monotonic() - self._durability_at > DURABILITY_RECHECK_SECONDS:
            found = await self._db.transaction(durability.read)
            if found != self._durability:
                durability.report(found, require_synchronous=False)
            self._durability, self._durability_at = found, time.monotonic()
        return None if self._durability is None else self._durability.as_json()

    async def close(self) -> None:
        await self.batching.stop()
        await self._db.close()

    async def _fetch(self, query: str, params: Sequence[Any]) -> list[Any]:
        """A shared statement (``?`` placeholders), renumbered, and its rows."""
        return await self._db.fetch(_n(query), *params)

    async def ping(self) -> None:
        await self._db.fetch("SELECT 1")

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True,
        audit: AuditEntry | None = None,
    ) -> IngestResult:  # fmt: skip
        if audit is not None:  # an admin call's: its own transaction, with its audit row
            return await self.batching.ingest_alone(event, handlers, resolve, audit)
        return await self.batching.ingest(event, handlers, resolve)

    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        rows = await self._db.fetch(_n(sql.SELECT_JOB), source, job_id)
        return codec.job_row(rows[0]) if rows else None

    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        async def op(conn: Conn) -> list[CompletionRow]:
            args = (owner, now + lease_seconds, now, now, limit)
            rows = await conn.fetch(pg_sql.CLAIM_COMPLETIONS, *args)
            return [codec.completion_row(r) for r in rows]

        return await self._db.transaction(op)

    async def retry_completion(
        self, completion_id: int, owner: str, error: str, next_attempt_at: float
    ) -> None:
        args = (error, next_attempt_at, completion_id, owner)
        await self._db.execute(_n(sql.RETRY_COMPLETION), *args)

    async def claim_dispatches(
        self, owner: str, limit: int, lease_seconds: float, now: float, busy: Sequence[str] = ()
    ) -> list[tuple[DispatchRow, CompletionRow]]:
        skip = list(busy)

        async def op(conn: Conn) -> list[tuple[DispatchRow, CompletionRow]]:
            claimed = await _probes(conn, owner, now + lease_seconds, now, skip)
            left = max(limit - len(claimed), 0)
            args = (owner, now + lease_seconds, now, now, now, left, skip)
            rows = await conn.fetch(pg_sql.CLAIM_DISPATCHES, *args)
            claimed += [codec.dispatch_row(r) for r in rows]
            if not claimed:
                return []
            ids = sorted({d.completion_id for d in claimed})
            rows = await conn.fetch(pg_sql.COMPLETIONS_BY_ID, ids)
            by_id = {c.id: c for c in map(codec.completion_row, rows)}
            return [(d, by_id[d.completion_id]) for d in claimed]

        return await self._db.transaction(op)

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
        finish = _n(sql.FINISH_DISPATCH)

        async def op(conn: Conn) -> None:
            await conn.execute(pg_sql.RECORD_ATTEMPT, *history.record_params(params))
            await conn.execute(finish, *params)

        await self._db.transaction(op)

    async def renew(self, owner: str, lease_until: float) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(_n(sql.RENEW_DISPATCHES), lease_until, owner)
            await conn.execute(_n(sql.RENEW_COMPLETIONS), lease_until, owner)

        await self._db.transaction(op)

    async def release(self, owner: str) -> int:
        async def op(conn: Conn) -> int:
            dispatches = await conn.execute(pg_sql.RELEASE_DISPATCHES, owner)
            completions = await conn.execute(pg_sql.RELEASE_COMPLETIONS, owner)
            return affected(dispatches) + affected(completions)

        return await self._db.transaction(op)

    async def heartbeat(self, owner: str, now: float) -> None:
        await self._db.execute(_n(sql.HEARTBEAT), owner, now, now)

    async def take_back_stale(self, stale_before: float) -> int:
        async def op(conn: Conn) -> int:
            dead = await conn.fetch(_n(sql.STALE_REPLICAS), stale_before)
            freed = 0
            for (owner,) in dead:
                freed += affected(await conn.execute(_n(sql.TAKE_BACK_DISPATCHES), owner))
                freed += affected(await conn.execute(_n(sql.TAKE_BACK_COMPLETIONS), owner))
                await conn.execute(_n(sql.TAKE_BACK_LEASES), owner)
            return freed

        return await self._db.transaction(op)

    async def next_due(self, busy: Sequence[str] = ()) -> float | None:
        return _first(await self._db.fetch(pg_sql.NEXT_DUE, list(busy)))

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

        async def op(conn: Conn) -> int:
            count = affected(await conn.execute(_n(query), *params))
            await audited(conn, audit, count)
            return count

        return await self._db.transaction(op)

    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        rows = await self._db.fetch(_n(sql.DUE_POLLS), source, now, limit)
        return [codec.job_row(r) for r in rows]

    async def next_poll_at(self) -> float | None:
        return _first(await self._db.fetch(sql.NEXT_POLL))

    async def schedule_poll(self, source: str, job_id: str, at: float, attempts: int) -> None:
        await self._db.execute(_n(sql.SCHEDULE_POLL), at, attempts, source, job_id)

    async def acquire_lease(self, name: str, owner: str, ttl: float, now: float) -> bool:
        async def op(conn: Conn) -> bool:
            held = await conn.fetchval(_n(sql.ACQUIRE_LEASE), name, owner, now + ttl, now)
            return held is not None

        return await self._db.transaction(op)

    async def start_result_fetch(self, completion_id: int, now: float) -> bool:
        async def op(conn: Conn) -> bool:
            row = await conn.fetchval(_n(sql.START_RESULT_FETCH), completion_id, now)
            return row is not None

        return await self._db.transaction(op)

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        params = codec.resolution_params(completion_id, owner, resolution)
        rows = fields.insert_rows(completion_id, resolution.fields)

        async def op(conn: Conn) -> bool:
            if not affected(await conn.execute(pg_sql.RESOLVE_COMPLETION, *params)):
                return False
            if rows:
                await conn.execute(pg_sql.DELETE_FIELDS, completion_id)
                await conn.executemany(pg_sql.INSERT_FIELD, rows)
            return True

        return bool(await self._db.transaction(op))

    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        params = circuits.failed_params(handler, threshold, cooldown, now)
        rows = await self._db.transaction(lambda conn: conn.fetch(pg_sql.CIRCUIT_FAILED, *params))
        state: str = rows[0][0]
        return state

    async def circuit_succeeded(self, handler: str, now: float) -> None:
        await self._db.execute(pg_sql.CIRCUIT_SUCCEEDED, now, handler)

    async def circuit_probe_now(self, handler: str, now: float) -> None:
        async def op(conn: Conn) -> None:
            await conn.execute(pg_sql.PROBE_DUE, now, handler, now, handler)
            await conn.execute(pg_sql.PROBE_NOW, now, now, handler, now)

        await self._db.transaction(op)

    async def circuits(self) -> list[CircuitRow]:
        return [circuits.circuit_row(r) for r in await self._db.fetch(circuits.LIST)]

    async def count_replayable(self, f: ReplayFilter) -> int:
        query, params = bulk.count_query(f)
        count: int = (await self._db.fetch(pg_sql.with_metadata(query), *params))[0][0]
        return count

    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        query, params = bulk.chunk_query(f, after_id, limit)
        ids = [row[0] for row in await self._db.fetch(pg_sql.with_metadata(query), *params)]
        if not ids:
            return 0, None
        requeue = pg_sql.with_metadata(bulk.requeue_query(len(ids)))
        changed = await self._db.execute(requeue, now, now, f.dispatch_state, *ids)
        return changed, ids[-1]

    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        params = reprocesses.claim_params(source, job_id, owner, now, stale_before, force)
        rows = await self._db.transaction(lambda conn: conn.fetch(pg_sql.CLAIM_REPROCESS, *params))
        return bool(rows)

    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        state = reprocesses.state_of(new_job_id, unknown)
        await self._db.execute(
            pg_sql.FINISH_REPROCESS, state, new_job_id, error, now, source, job_id, owner
        )

    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        rows = await self._db.fetch(_n(reprocesses.OF_JOB), source, job_id)
        return reprocesses.row(rows[0]) if rows else None

    async def audit_start(self, entry: AuditEntry) -> int:
        rows = await self._db.fetch(_AUDIT_INSERT, *audit.insert_params(entry))
        return int(rows[0][0])

    async def audit_finish(
        self, audit_id: int, outcome: str, *, jobs: int | None, ref: str | None, now: float
    ) -> None:
        await self._db.execute(
            _AUDIT_FINISH, *audit.finish_params(audit_id, outcome, jobs, ref, now)
        )

    async def audit_refused(self, entry: AuditEntry, reason: str) -> None:
        await self._db.execute(_AUDIT_REFUSED, *audit.refused_params(entry, reason))

    async def purge_audit(self, before: float, limit: int) -> int:
        return await self._db.execute(_AUDIT_PURGE, before, limit)

    async def audit_rows(
        self, f: AuditFilter, *, after_id: int | None, limit: int
    ) -> list[AuditRow]:
        query, params = audit.list_query(f, after_id, limit)
        return [audit.row(r) for r in await self._db.fetch(_n(query), *params)]

    async def confirmations_due(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in await self._db.fetch(queries.CONFIRMATIONS_DUE)}

    async def fields_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[FieldValue]]:
        return await fields.fields_of(self._fetch, keys)

    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        return await self._db.transaction(lambda conn: _purge(conn, before, limit))

    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        rows = await self._db.fetch(_n(queries.DELIVERED_RESULTS), limit)
        return [(int(r[0]), str(r[1])) for r in rows]

    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        if not completion_ids:
            return 0
        return await self._db.execute(pg_sql.FORGET_RESULTS, list(completion_ids))

    # Reads: what the admin API and the console show

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobKey | None = None
    ) -> list[JobListing]:
        query, params = pg_sql.list_jobs_query(where, limit, after)
        return [queries.listing_row(r) for r in await self._db.fetch(query, *params)]

    async def deliveries_for(self, source: str, job_id: str) -> list[DeliveryRow]:
        rows = await self._db.fetch(_n(queries.SELECT_DELIVERIES), source, job_id)
        return [queries.delivery_row(r) for r in rows]

    async def dispatches_for(self, source: str, job_id: str) -> list[DispatchRow]:
        rows = await self._db.fetch(_n(sql.SELECT_DISPATCHES_FOR), source, job_id)
        return [codec.dispatch_row(r) for r in rows]

    async def completion_for(self, source: str, job_id: str) -> CompletionRow | None:
        rows = await self._db.fetch(pg_sql.COMPLETION_FOR, source, job_id)
        return codec.completion_row(rows[0]) if rows else None

    async def job_stats(self, since: float, *, sources: Sequence[str] | None = None) -> JobStats:
        return await queries.job_stats(self._fetch, since, sources)

    async def field_names(self, where: JobFilter, limit: int) -> list[str]:
        query, params = queries.field_names_query(where, limit)
        return [str(r[0]) for r in await self._db.fetch(pg_sql.with_metadata(query), *params)]

    async def field_stats(
        self, since: float, thresholds: Mapping[str, float], default: float, *,
        sources: Sequence[str] | None = None,
    ) -> FieldStats:  # fmt: skip
        return await fields.field_stats(self._fetch, since, thresholds, default, sources)

    async def completions_after(
        self, after_id: int, limit: int, *, sources: Sequence[str] | None = None
    ) -> list[CompletionRow]:
        query, params = queries.completions_after_query(after_id, limit, sources)

        async def op(conn: Conn) -> list[CompletionRow]:
            await conn.execute(pg_sql.LOCK_COMPLETIONS)  # none in flight below what we read
            rows = await conn.fetch(_n(query), *params)
            return [codec.completion_row(r) for r in rows]

        return await self._db.transaction(op)

    async def last_completion_id(self) -> int:
        async def op(conn: Conn) -> int:
            await conn.execute(pg_sql.LOCK_COMPLETIONS)
            return int(await conn.fetchval(queries.LAST_COMPLETION_ID))

        return await self._db.transaction(op)

    async def attempts_for(self, source: str, job_id: str) -> list[AttemptRow]:
        rows = await self._db.fetch(_n(history.ATTEMPTS_FOR), source, job_id)
        return [AttemptRow(*r) for r in rows]

    async def completed_over_time(self, since: float, width: float) -> list[TimeBucket]:
        rows = await self._db.fetch(pg_sql.COMPLETED_OVER_TIME, width, since)
        return [TimeBucket(r[0] * width, r[1], r[2], r[3]) for r in rows]

    async def outcomes_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[OutcomeBucket]:
        query = pg_sql.outcomes_over_time(sources)
        rows = await self._db.fetch(query, *history.over_time_params(width, since, sources))
        return [history.outcome_bucket(r, width) for r in rows]

    async def errors_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[ErrorBucket]:
        query = pg_sql.errors_over_time(sources)
        rows = await self._db.fetch(query, *history.over_time_params(width, since, sources, 2))
        return [ErrorBucket(r[0] * width, r[1], r[2]) for r in rows]

    async def dead_groups(self, *, sources: Sequence[str] | None = None) -> list[DeadGroup]:
        return [DeadGroup(*r) for r in await self._fetch(*history.dead_groups_query(sources))]

    async def dead_list(
        self, handler: str | None, code: str | None, limit: int, *,
        sources: Sequence[str] | None = None,
    ) -> list[DeadRow]:  # fmt: skip
        rows = await self._fetch(*history.dead_list_query(handler, code, limit, sources))
        return [DeadRow(*r) for r in rows]

    async def backlog(self) -> Backlog:
        (row,) = await self._db.fetch(queries.BACKLOG)
        return queries.backlog_row(row)

    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        rows = await self._db.fetch(_n(reprocesses.FROM_JOB), source, new_job_id)
        return reprocesses.row(rows[0]) if rows else None

    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        if not job_ids:
            return {}
        query = _n(reprocesses.of_jobs(len(job_ids)))
        rows = await self._db.fetch(query, source, *job_ids)
        return {r.job_id: r for r in map(reprocesses.row, rows)}


def _first(rows: list[Any]) -> float | None:
    return rows[0][0] if rows and rows[0][0] is not None else None


async def _purge(conn: Conn, before: float, limit: int) -> tuple[int, list[str]]:
    """Delete up to ``limit`` delivered jobs with everything they own; return result paths."""
    rows = await conn.fetch(pg_sql.PURGEABLE, before, before, limit)
    keys = [(r[0],) for r in rows]
    completions = [(r[1],) for r in rows if r[1] is not None]
    await conn.executemany(_n(queries.DELETE_DELIVERIES), keys)
    await conn.executemany(_n(queries.DELETE_DISPATCHES), completions)
    await conn.executemany(_n(queries.DELETE_COMPLETION), completions)
    await conn.executemany(_n(queries.DELETE_JOB), keys)
    return len(rows), [r[2] for r in rows if r[2]]


async def _probes(
    conn: Conn, owner: str, until: float, now: float, busy: Collection[str] = ()
) -> list[DispatchRow]:
    """Take the probes that are due, inside the claim's transaction; a ``busy`` handler's
    probe waits, its circuit open, until the handler has a free slot."""
    claimed: list[DispatchRow] = []
    for (handler,) in await conn.fetch(pg_sql.TAKE_PROBES, until, now, now):
        row = None
        if handler not in busy:
            row = await conn.fetchrow(pg_sql.CLAIM_PROBE, owner, until, now, handler, now, now)
        if row is None:
            await conn.execute(pg_sql.NO_PROBE, handler, now, handler)
        else:
            claimed.append(codec.dispatch_row(row))
    return claimed
