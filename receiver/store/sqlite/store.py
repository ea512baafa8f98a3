"""The embedded store: one SQLite file in WAL mode, written by a single group-committing writer.

Every write is an operation queued to one writer task (``receiver.store.sqlite.group_commit``),
which runs whatever has queued up in one transaction and one fsync, so many concurrent webhooks
share a commit; a big batch runs in a writer process (``receiver.store.sqlite.writer``). Reads
use a connection of their own and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite
import structlog

from receiver.errors import StoreUnavailableError
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
from receiver.store.rows import AttemptRow, DeadGroup, DeadRow, ErrorBucket, TimeBucket
from receiver.store.sqlite import operations, writer
from receiver.store.sqlite.checkpoint import Checkpointer
from receiver.store.sqlite.group_commit import OFFLOAD_AT, GroupCommit
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS, statements
from receiver.store.sqlite.ownership import StoreLock
from receiver.store.sqlite.writer_client import WriterGoneError, WriterProcess

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry, AuditFilter, AuditRow
    from receiver.store.bulk import ReplayFilter
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

T = TypeVar("T")
log = structlog.get_logger(__name__)
# A bucket's number: SQLite's CAST truncates, which is floor for these positive times.
_BUCKET = "CAST({} / ? AS INTEGER)"
_COMPLETED_OVER_TIME = history.completed_over_time(_BUCKET)


class SQLiteStore(Store):
    """SQLite: the default, for one process. Writes go through ``sqlite3`` on a thread of the
    store's own (aiosqlite runs each statement as its own trip to its thread, and a trip is
    the cost group commit is there to share); reads through aiosqlite."""

    def __init__(self, path: Path, *, batch_max: int = 512, offload_at: int = OFFLOAD_AT) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._reader: aiosqlite.Connection | None = None
        self._process = WriterProcess(path)
        self._lock = StoreLock(path)
        self._commits = GroupCommit(self._process, batch_max=batch_max, offload_at=offload_at)
        self._checkpointer = Checkpointer(path, hold=self._commits.held)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Used from two threads, never at once: see GroupCommit._run_here.
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-store")
            self._db = db = await self._on_thread(writer.connect, self.path)
            await self._on_thread(_migrate, db)
            if await asyncio.to_thread(self._lock.acquire):
                await self._on_thread(_take_back_all, db)
                self._process.keep_fds = (self._lock.fd,) if self._lock.fd is not None else ()
            else:
                log.info("store_shared", lock=str(self._lock.path))
            await self._process.start()
            self._checkpointer.start()
            self._reader = await aiosqlite.connect(self.path, isolation_level=None)
            await self._reader.execute("PRAGMA busy_timeout=5000")
            await self._reader.execute("PRAGMA query_only=ON")
        except (sqlite3.Error, OSError, WriterGoneError) as exc:
            await self.close()
            raise StoreUnavailableError(f"cannot open SQLite store {self.path}: {exc}") from exc
        self._commits.start(db, self._thread)

    async def close(self) -> None:
        await self._commits.stop()
        await self._process.stop()
        await asyncio.to_thread(self._checkpointer.stop)
        if self._reader is not None:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await self._reader.close()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                await self._on_thread(self._db.close)
        if self._thread is not None:
            self._thread.shutdown()
        self._db = self._reader = self._thread = None
        self._lock.release()

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the store's thread, where the write connection was opened."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(fn, *args))

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` in the group commit's next batch (``GroupCommit.write``)."""
        return await self._commits.write(fn, *args)

    async def _read(self, query: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        if self._reader is None:
            raise StoreUnavailableError("the store is not open")
        try:
            return list(await self._reader.execute_fetchall(query, params))
        except (sqlite3.Error, ValueError) as exc:
            raise StoreUnavailableError(f"SQLite read failed: {exc}") from exc

    async def ping(self) -> None:
        await self._read("SELECT 1")
        if not self._commits.running:
            raise StoreUnavailableError("the store writer is not running")

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True,
        audit: AuditEntry | None = None,
    ) -> IngestResult:  # fmt: skip
        return await self._write(operations.ingest, event, handlers, resolve, codec.now(), audit)

    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        rows = await self._read(sql.SELECT_JOB, (source, job_id))
        return codec.job_row(rows[0]) if rows else None

    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        until = now + lease_seconds
        return await self._write(operations.claim_completions, owner, limit, until, now)

    async def retry_completion(
        self, completion_id: int, owner: str, error: str, next_attempt_at: float
    ) -> None:
        params = (error, next_attempt_at, completion_id, owner)
        await self._write(operations.execute, sql.RETRY_COMPLETION, params)

    async def claim_dispatches(
        self, owner: str, limit: int, lease_seconds: float, now: float, busy: Sequence[str] = ()
    ) -> list[tuple[DispatchRow, CompletionRow]]:
        until = now + lease_seconds
        return await self._write(operations.claim_dispatches, owner, limit, until, now, tuple(busy))

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
        await self._write(operations.finish_dispatch, params)

    async def renew(self, owner: str, lease_until: float) -> None:
        await self._write(operations.renew, owner, lease_until)

    async def release(self, owner: str) -> int:
        return await self._write(operations.release, owner)

    async def heartbeat(self, owner: str, now: float) -> None:
        await self._write(operations.heartbeat, owner, now)

    async def take_back_stale(self, stale_before: float) -> int:
        return await self._write(operations.take_back_stale, stale_before)

    async def next_due(self, busy: Sequence[str] = ()) -> float | None:
        rows = await self._read(sql.NEXT_DUE, {"busy": json.dumps(list(busy))})
        return rows[0][0] if rows and rows[0][0] is not None else None

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
        return await self._write(operations.changed, query, params, audit)

    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        rows = await self._read(sql.DUE_POLLS, (source, now, limit))
        return [codec.job_row(r) for r in rows]

    async def next_poll_at(self) -> float | None:
        rows = await self._read(sql.NEXT_POLL)
        return rows[0][0] if rows and rows[0][0] is not None else None

    async def schedule_poll(self, source: str, job_id: str, at: float, attempts: int) -> None:
        params = (at, attempts, source, job_id)
        await self._write(operations.execute, sql.SCHEDULE_POLL, params)

    async def acquire_lease(self, name: str, owner: str, ttl: float, now: float) -> bool:
        return await self._write(operations.acquire_lease, name, owner, now + ttl, now)

    async def start_result_fetch(self, completion_id: int, now: float) -> bool:
        return await self._write(operations.start_result_fetch, completion_id, now)

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        params = codec.resolution_params(completion_id, owner, resolution)
        rows = fields.insert_rows(completion_id, resolution.fields)
        return bool(await self._write(operations.resolve_completion, params, completion_id, rows))

    async def circuit_failed(
        self, handler: str, threshold: int, cooldown: float, now: float
    ) -> str:
        params = circuits.failed_params(handler, threshold, cooldown, now)
        return await self._write(operations.circuit_failed, params)

    async def circuit_succeeded(self, handler: str, now: float) -> None:
        await self._write(operations.execute, circuits.SUCCEEDED, (now, handler))

    async def circuit_probe_now(self, handler: str, now: float) -> None:
        await self._write(operations.circuit_probe_now, handler, now)

    async def circuits(self) -> list[CircuitRow]:
        return [circuits.circuit_row(r) for r in await self._read(circuits.LIST)]

    async def count_replayable(self, f: ReplayFilter) -> int:
        query, params = bulk.count_query(f)
        count: int = (await self._read(query, params))[0][0]
        return count

    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        query, params = bulk.chunk_query(f, after_id, limit)
        ids = [row[0] for row in await self._read(query, params)]
        if not ids:
            return 0, None
        args = (now, now, f.dispatch_state, *ids)
        changed = await self._write(operations.changed, bulk.requeue_query(len(ids)), args)
        return changed, ids[-1]

    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        params = reprocesses.claim_params(source, job_id, owner, now, stale_before, force)
        return await self._write(operations.claim_reprocess, params)

    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        state = reprocesses.state_of(new_job_id, unknown)
        params = (state, new_job_id, error, now, source, job_id, owner)
        await self._write(operations.execute, reprocesses.FINISH, params)

    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        rows = await self._read(reprocesses.OF_JOB, (source, job_id))
        return reprocesses.row(rows[0]) if rows else None

    async def audit_start(self, entry: AuditEntry) -> int:
        return await self._write(operations.inserted_id, audit.INSERT, audit.insert_params(entry))

    async def audit_finish(
        self, audit_id: int, outcome: str, *, jobs: int | None, ref: str | None, now: float
    ) -> None:
        params = audit.finish_params(audit_id, outcome, jobs, ref, now)
        await self._write(operations.execute, audit.FINISH, params)

    async def audit_refused(self, entry: AuditEntry, reason: str) -> None:
        await self._write(operations.execute, audit.REFUSED, audit.refused_params(entry, reason))

    async def purge_audit(self, before: float, limit: int) -> int:
        return await self._write(operations.changed, audit.PURGE, (before, limit))

    async def audit_rows(
        self, f: AuditFilter, *, after_id: int | None, limit: int
    ) -> list[AuditRow]:
        query, params = audit.list_query(f, after_id, limit)
        return [audit.row(r) for r in await self._read(query, params)]

    async def confirmations_due(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in await self._read(queries.CONFIRMATIONS_DUE)}

    async def fields_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[FieldValue]]:
        return await fields.fields_of(self._read, keys)

    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        return await self._write(operations.purge, before, limit)

    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        rows = await self._read(queries.DELIVERED_RESULTS, (limit,))
        return [(int(r[0]), str(r[1])) for r in rows]

    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        if not completion_ids:
            return 0
        query = queries.forget_results_query(len(completion_ids))
        return await self._write(operations.changed, query, list(completion_ids))

    # Reads: what the admin API and the console show

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
        rows = await self._read(
            f"{sql.SELECT_COMPLETION} WHERE job = {sql.JOB_KEY}", (source, job_id)
        )
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
        rows = await self._read(*queries.completions_after_query(after_id, limit, sources))
        return [codec.completion_row(r) for r in rows]

    async def last_completion_id(self) -> int:
        ((last,),) = await self._read(queries.LAST_COMPLETION_ID)
        return int(last)

    async def attempts_for(self, source: str, job_id: str) -> list[AttemptRow]:
        return [AttemptRow(*r) for r in await self._read(history.ATTEMPTS_FOR, (source, job_id))]

    async def completed_over_time(self, since: float, width: float) -> list[TimeBucket]:
        rows = await self._read(_COMPLETED_OVER_TIME, (width, since))
        return [TimeBucket(r[0] * width, r[1], r[2], r[3]) for r in rows]

    async def outcomes_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[OutcomeBucket]:
        query = history.outcomes_over_time(_BUCKET, sources)
        rows = await self._read(query, history.over_time_params(width, since, sources))
        return [history.outcome_bucket(r, width) for r in rows]

    async def errors_over_time(
        self, since: float, width: float, *, sources: Sequence[str] | None = None
    ) -> list[ErrorBucket]:
        query = history.errors_over_time(_BUCKET, sources)
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


def _take_back_all(db: sqlite3.Connection) -> None:
    """We own the store: free every claim the processes before us left in it."""
    freed = 0
    db.execute("BEGIN IMMEDIATE")
    try:
        for number, statement in enumerate(sql.TAKE_BACK_ALL):
            count = db.execute(statement).rowcount
            freed += count if number < 2 else 0  # claims; then the leases and replicas
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    if freed:
        log.info("store_claims_taken_back", count=freed)


def _migrate(db: sqlite3.Connection) -> None:
    """Apply the pending migrations, each in one transaction that reads the version again once
    it holds the write lock (another process opening the store may have migrated meanwhile).
    Foreign keys are off while they run (a rebuilt table is dropped and replaced: with them on,
    dropping ``completions`` would delete every dispatch), and ``foreign_key_check`` must find
    nothing before each commits."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version >= len(SQLITE_MIGRATIONS):
        return
    db.execute("PRAGMA foreign_keys=OFF")  # a no-op inside a transaction: set before them
    log.info("store_migrating", version=version, to=len(SQLITE_MIGRATIONS))
    try:
        for number, script in enumerate(SQLITE_MIGRATIONS[version:], start=version + 1):
            started = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            try:
                if db.execute("PRAGMA user_version").fetchone()[0] >= number:
                    db.execute("COMMIT")
                    continue
                for statement in statements(script):
                    db.execute(statement)
                broken = db.execute("PRAGMA foreign_key_check").fetchmany(5)
                if broken:
                    message = f"migration {number} breaks foreign keys: {broken}"
                    raise sqlite3.IntegrityError(message)
                db.execute(f"PRAGMA user_version={number}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            log.info("store_migrated", version=number,
                     seconds=round(time.perf_counter() - started, 3))  # fmt: skip
        # A migration that rewrites tables leaves a WAL as large as they are: copy it back
        # and start the file over now, not under the first load.
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        db.execute("PRAGMA foreign_keys=ON")
