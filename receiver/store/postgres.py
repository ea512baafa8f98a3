"""The shared store for several replicas: PostgreSQL through an asyncpg pool.

Each write is one transaction on a pooled connection, except webhooks: their ingests are
grouped, a batch stored by one function call and one commit (``receiver.store.pg_batch``), a few
batches in flight at once. Constraints and row locks do what the SQLite store's
single writer does: a message id is accepted once however many replicas race for it, and claims
use ``FOR UPDATE SKIP LOCKED`` so two replicas never lease the same work.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from receiver.store import pg_durability, pg_sql, queries, records, sql
from receiver.store.base import Store
from receiver.store.bulk import PostgresBulk
from receiver.store.circuit_stores import PostgresCircuits, pg_probes
from receiver.store.field_stores import PostgresFields
from receiver.store.history import PostgresHistory, pg_finish
from receiver.store.pg_batch import IN_FLIGHT, PgGroupCommit
from receiver.store.pg_pool import PgPool, affected
from receiver.store.pg_schema import migrate
from receiver.store.reprocesses import PostgresReprocesses

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.pg_durability import Durability
    from receiver.store.pg_pool import Conn
    from receiver.store.rows import (
        Backlog,
        CompletionRow,
        DeliveryRow,
        DispatchRow,
        JobFilter,
        JobKey,
        JobListing,
        JobRow,
        JobStats,
    )

_n = pg_sql.numbered
DURABILITY_RECHECK_SECONDS = 30.0


class PostgresStore(
    PostgresBulk, PostgresCircuits, PostgresFields, PostgresReprocesses, PostgresHistory, Store
):
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
        """Ingests are stored a batch at a time (``receiver.store.pg_batch``)."""

    def __repr__(self) -> str:
        return f"PostgresStore({self._db.display_url!r})"

    async def open(self) -> None:
        await self._db.open(self._setup)
        self.batching.start()

    async def _setup(self, conn: Conn) -> None:
        await migrate(conn)
        self._durability = await pg_durability.read(conn)
        self._durability_at = time.monotonic()
        pg_durability.report(self._durability, require_synchronous=self._require_sync)

    async def durability(self) -> dict[str, object] | None:
        # Read again now and then: after a failover the server and its standbys have changed.
        if time.monotonic() - self._durability_at > DURABILITY_RECHECK_SECONDS:
            found = await self._db.transaction(pg_durability.read)
            if found != self._durability:
                pg_durability.report(found, require_synchronous=False)
            self._durability, self._durability_at = found, time.monotonic()
        return None if self._durability is None else self._durability.as_json()

    async def close(self) -> None:
        await self.batching.stop()
        await self._db.close()

    async def ping(self) -> None:
        await self._db.fetch("SELECT 1")

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True
    ) -> IngestResult:
        return await self.batching.ingest(event, handlers, resolve)

    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        rows = await self._db.fetch(_n(sql.SELECT_JOB), source, job_id)
        return records.job_row(rows[0]) if rows else None

    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        async def op(conn: Conn) -> list[CompletionRow]:
            args = (owner, now + lease_seconds, now, now, limit)
            rows = await conn.fetch(pg_sql.CLAIM_COMPLETIONS, *args)
            return [records.completion_row(r) for r in rows]

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
            claimed = await pg_probes(conn, owner, now + lease_seconds, now, skip)
            left = max(limit - len(claimed), 0)
            args = (owner, now + lease_seconds, now, now, now, left, skip)
            rows = await conn.fetch(pg_sql.CLAIM_DISPATCHES, *args)
            claimed += [records.dispatch_row(r) for r in rows]
            if not claimed:
                return []
            ids = sorted({d.completion_id for d in claimed})
            rows = await conn.fetch(pg_sql.COMPLETIONS_BY_ID, ids)
            by_id = {c.id: c for c in map(records.completion_row, rows)}
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
        params = records.finish_params(dispatch_id, owner, error, next_attempt_at, error_code)
        await pg_finish(self._db, _n(sql.FINISH_DISPATCH), params)

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
    ) -> int:
        query, params = sql.replay_query(source, job_id, handler, since, include_succeeded)
        return await self._db.execute(_n(query), *params)

    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        rows = await self._db.fetch(_n(sql.DUE_POLLS), source, now, limit)
        return [records.job_row(r) for r in rows]

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

    async def dispatches_for(self, source: str, job_id: str) -> list[DispatchRow]:
        rows = await self._db.fetch(_n(sql.SELECT_DISPATCHES_FOR), source, job_id)
        return [records.dispatch_row(r) for r in rows]

    async def completion_for(self, source: str, job_id: str) -> CompletionRow | None:
        rows = await self._db.fetch(pg_sql.COMPLETION_FOR, source, job_id)
        return records.completion_row(rows[0]) if rows else None

    # Queries for the admin API (receiver.store.queries, renumbered)

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobKey | None = None
    ) -> list[JobListing]:
        query, params = pg_sql.list_jobs_query(where, limit, after)
        return [queries.listing_row(r) for r in await self._db.fetch(query, *params)]

    async def deliveries_for(self, source: str, job_id: str) -> list[DeliveryRow]:
        rows = await self._db.fetch(_n(queries.SELECT_DELIVERIES), source, job_id)
        return [queries.delivery_row(r) for r in rows]

    async def job_stats(self, since: float) -> JobStats:
        async def read(query: str, params: Sequence[Any]) -> list[Any]:
            return await self._db.fetch(_n(query), *params)

        return await queries.job_stats(read, since)

    async def completions_after(self, after_id: int, limit: int) -> list[CompletionRow]:
        async def op(conn: Conn) -> list[CompletionRow]:
            await conn.execute(pg_sql.LOCK_COMPLETIONS)  # none in flight below what we read
            rows = await conn.fetch(_n(queries.COMPLETIONS_AFTER), after_id, limit)
            return [records.completion_row(r) for r in rows]

        return await self._db.transaction(op)

    async def last_completion_id(self) -> int:
        async def op(conn: Conn) -> int:
            await conn.execute(pg_sql.LOCK_COMPLETIONS)
            return int(await conn.fetchval(queries.LAST_COMPLETION_ID))

        return await self._db.transaction(op)

    async def backlog(self) -> Backlog:
        (row,) = await self._db.fetch(queries.BACKLOG)
        return queries.backlog_row(row)

    async def confirmations_due(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in await self._db.fetch(queries.CONFIRMATIONS_DUE)}

    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        return await self._db.transaction(lambda conn: _purge(conn, before, limit))

    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        rows = await self._db.fetch(_n(queries.DELIVERED_RESULTS), limit)
        return [(int(r[0]), str(r[1])) for r in rows]

    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        if not completion_ids:
            return 0
        return await self._db.execute(pg_sql.FORGET_RESULTS, list(completion_ids))


def _first(rows: list[Any]) -> float | None:
    return rows[0][0] if rows and rows[0][0] is not None else None


async def _purge(conn: Conn, before: float, limit: int) -> tuple[int, list[str]]:
    """Delete up to ``limit`` delivered jobs with everything they own; return result paths."""
    rows = await conn.fetch(pg_sql.PURGEABLE, before, before, limit)
    keys = [(r[0], r[1]) for r in rows]
    completions = [(r[2],) for r in rows if r[2] is not None]
    await conn.executemany(_n(queries.DELETE_DELIVERIES), keys)
    await conn.executemany(_n(queries.DELETE_DISPATCHES), completions)
    await conn.executemany(_n(queries.DELETE_COMPLETION), completions)
    await conn.executemany(_n(queries.DELETE_JOB), keys)
    return len(rows), [r[3] for r in rows if r[3]]
