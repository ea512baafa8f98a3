"""The embedded store: one SQLite file in WAL mode, written by a single group-committing writer.

Every write is an operation queued to one writer task, which runs whatever has queued up in one
transaction and one fsync (group commit), so many concurrent webhooks share a commit. A big
batch runs in a writer process (``receiver.store.writer``), off the event loop's core; a small
one here (``_commit_sync``). Reads use a connection of their own and never wait for the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite
import structlog

from receiver.errors import JobhookError, StoreUnavailableError
from receiver.store import queries, records, sql, sqlite_ops
from receiver.store.base import Store
from receiver.store.schema import SQLITE_MIGRATIONS
from receiver.store.writer import PRAGMAS
from receiver.store.writer_client import WriterGoneError, WriterProcess, encode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from pathlib import Path

    from receiver.models import Event, IngestResult
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
        Resolution,
    )
    from receiver.store.writer import Op, Reply

T = TypeVar("T")
OFFLOAD_AT = 4
"""Batches of this many plain operations or more run in the writer process (``_commit_sync``)."""
log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _Write:
    fn: Callable[[aiosqlite.Connection], Awaitable[Any]]
    future: asyncio.Future[Any]
    sync: Op | None = None
    """The same operation as a plain function and its arguments: a batch made only of these
    runs in the writer process (``_commit_sync``)."""


class SQLiteStore(Store):
    """SQLite through aiosqlite: the default, for one process."""

    def __init__(self, path: Path, *, batch_max: int = 512, offload_at: int = OFFLOAD_AT) -> None:
        self.path = path
        self._batch_max = batch_max
        self._offload_at = offload_at
        self._db: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Write | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._process = WriterProcess(path)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Used from two threads, never at once: see _commit_sync.
            self._db = await aiosqlite.connect(
                self.path, isolation_level=None, check_same_thread=False
            )
            for pragma in PRAGMAS:
                await self._db.execute(f"PRAGMA {pragma}")
            await self._migrate(self._db)
            await self._process.start()
            self._reader = await aiosqlite.connect(self.path, isolation_level=None)
            await self._reader.execute("PRAGMA busy_timeout=5000")
            await self._reader.execute("PRAGMA query_only=ON")
        except (sqlite3.Error, OSError, WriterGoneError) as exc:
            await self.close()
            raise StoreUnavailableError(f"cannot open SQLite store {self.path}: {exc}") from exc
        self._writer = asyncio.create_task(self._run_writer(), name="sqlite-writer")

    async def close(self) -> None:
        if self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer
            self._writer = None
        await self._process.stop()
        for conn in (self._reader, self._db):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error, ValueError):
                    await conn.close()
        self._db = self._reader = None

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        (version,) = await _one(db, "PRAGMA user_version")
        for number, script in enumerate(SQLITE_MIGRATIONS[version:], start=version + 1):
            await db.executescript(
                f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version={number};\nCOMMIT;"
            )
            log.info("store_migrated", version=number)

    async def _write(self, fn: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        return await self._enqueue(fn, None)

    async def _write_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``_write`` for ``fn(connection, *args)``: a module-level function (it travels to
        the writer process by name) of picklable arguments (``receiver.store.sqlite_ops``)."""

        async def hop(db: aiosqlite.Connection) -> T:
            return await _on_thread(db, fn, *args)

        return await self._enqueue(hop, (fn, args))

    def _enqueue(
        self, fn: Callable[[aiosqlite.Connection], Awaitable[T]], sync: Op | None
    ) -> asyncio.Future[T]:
        """Queue one operation for the writer; its future is set once its batch commits.

        A caller that is cancelled while waiting does not cancel the write (the writer checks
        each future before setting it), so no shield is needed: one future per operation.
        """
        if self._writer is None or self._writer.done():
            raise StoreUnavailableError("the store is not open")
        future: asyncio.Future[T] = self._writer.get_loop().create_future()
        self._queue.put_nowait(_Write(fn, future, sync))
        return future

    async def _run_writer(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self._batch_max and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            await self._commit(batch)

    async def _commit(self, batch: list[_Write]) -> None:
        assert self._db is not None
        db = self._db
        if all(op.sync is not None for op in batch):
            await self._commit_sync(batch)
            return
        results: list[Any] = []
        current: _Write | None = None
        try:
            await db.execute("BEGIN IMMEDIATE")
            for op in batch:
                current = op
                results.append(await op.fn(db))
            current = None
            await db.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(Exception):
                await db.execute("ROLLBACK")
            if current is not None and len(batch) > 1:
                # One bad operation must not fail its neighbours: fail it, commit the rest.
                _fail([current], exc)
                await self._commit([op for op in batch if op is not current])
                return
            # BEGIN or COMMIT failed (locked, disk full, read-only): nothing was stored.
            _fail(batch, exc)
            return
        for op, result in zip(batch, results, strict=True):
            if not op.future.done():
                op.future.set_result(result)

    async def _commit_sync(self, batch: list[_Write]) -> None:
        """``_commit`` for a batch of plain operations, with the same outcomes: one bad
        operation fails alone and the rest commit; a failed BEGIN or COMMIT fails them all.

        A batch of ``offload_at`` operations or more runs in the writer process, off the event
        loop's core: batches that big mean webhooks are queueing for the loop (bench ingest at
        saturation: 16-32 a batch). A smaller one runs here, its statements on the loop's
        thread and only COMMIT (the fsync) on the SQLite thread: sparse writes (a poller's, a
        quiet service's) cost less that way than a trip to another process and back, which
        also wakes a process whose caches have gone cold (bench poller: 4.6 % of a core
        against 5.7 % with every batch sent there). Run on the SQLite thread, every statement
        would release the GIL inside SQLite and then wait for the loop's thread to hand it
        back: a 16-webhook batch took 3.7 ms that way, for 0.6 ms of work.
        """
        if len(batch) >= self._offload_at:
            reply = await self._offload(batch)
        else:
            reply = await self._run_here(batch)
        if reply is None:  # failed and settled already
            return
        if reply[0] == "ok":
            for op, result in zip(batch, reply[1], strict=True):
                if not op.future.done():
                    op.future.set_result(result)
            return
        index, error = reply[1], reply[2]
        if index is not None and len(batch) > 1:
            # One bad operation must not fail its neighbours: fail it, commit the rest.
            bad = batch[index]
            _fail([bad], error)
            await self._commit([op for op in batch if op is not bad])
            return
        _fail(batch, error)

    async def _run_here(self, batch: list[_Write]) -> Reply:
        """The batch's statements on the loop's thread, its COMMIT on the SQLite thread."""
        assert self._db is not None
        db = self._db
        conn = db._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            return ("failed", None, exc)
        results: list[Any] = []
        try:
            for op in batch:
                assert op.sync is not None
                fn, args = op.sync
                results.append(fn(conn, *args))
        except Exception as exc:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            return ("failed", len(results), exc)
        try:
            await _on_thread(db, _finish_batch)
        except Exception as exc:  # COMMIT failed (rolled back), or the connection is gone
            return ("failed", None, exc)
        return ("ok", results)

    async def _offload(self, batch: list[_Write]) -> Reply | None:
        """The batch in the writer process; None when it failed and was settled here: a
        process that dies with the batch fails it all (nothing was acknowledged, so the
        webhooks are sent again), and the next batch starts a new process."""
        try:
            data = encode([op.sync for op in batch if op.sync is not None])
        except Exception as exc:
            # Nothing was sent: fail what does not pickle, commit the rest.
            rest = _fail_unpicklable(batch, exc)
            if rest:
                await self._commit(rest)
            return None
        try:
            if not self._process.alive:
                log.warning("store_writer_starting", reason="the writer process is not running")
                await self._process.start()
            return await self._process.run(data)
        except Exception as exc:  # it is gone, or could not start: nothing was acknowledged
            _fail(batch, exc)
            return None

    async def _read(self, query: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        if self._reader is None:
            raise StoreUnavailableError("the store is not open")
        try:
            return list(await self._reader.execute_fetchall(query, params))
        except (sqlite3.Error, ValueError) as exc:
            raise StoreUnavailableError(f"SQLite read failed: {exc}") from exc

    async def ping(self) -> None:
        await self._read("SELECT 1")
        if self._writer is None or self._writer.done():
            raise StoreUnavailableError("the store writer is not running")

    async def ingest(
        self, event: Event, handlers: Sequence[str], *, resolve: bool = True
    ) -> IngestResult:
        return await self._write_sync(sqlite_ops.ingest, event, handlers, resolve, records.now())

    async def get_job(self, source: str, job_id: str) -> JobRow | None:
        rows = await self._read(sql.SELECT_JOB, (source, job_id))
        return records.job_row(rows[0]) if rows else None

    async def claim_completions(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[CompletionRow]:
        until = now + lease_seconds
        return await self._write_sync(sqlite_ops.claim_completions, owner, limit, until, now)

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> None:
        params = records.resolution_params(completion_id, owner, resolution)
        await self._write_sync(sqlite_ops.execute, sql.RESOLVE_COMPLETION, params)

    async def retry_completion(
        self, completion_id: int, owner: str, error: str, next_attempt_at: float
    ) -> None:
        params = (error, next_attempt_at, completion_id, owner)
        await self._write_sync(sqlite_ops.execute, sql.RETRY_COMPLETION, params)

    async def claim_dispatches(
        self, owner: str, limit: int, lease_seconds: float, now: float
    ) -> list[tuple[DispatchRow, CompletionRow]]:
        until = now + lease_seconds
        return await self._write_sync(sqlite_ops.claim_dispatches, owner, limit, until, now)

    async def finish_dispatch(
        self, dispatch_id: int, owner: str, *, error: str | None, next_attempt_at: float | None
    ) -> None:
        params = records.finish_params(dispatch_id, owner, error, next_attempt_at)
        await self._write_sync(sqlite_ops.execute, sql.FINISH_DISPATCH, params)

    async def renew(self, owner: str, lease_until: float) -> None:
        await self._write_sync(sqlite_ops.renew, owner, lease_until)

    async def release(self, owner: str) -> int:
        return await self._write_sync(sqlite_ops.release, owner)

    async def next_due(self) -> float | None:
        rows = await self._read(sql.NEXT_DUE)
        return rows[0][0] if rows and rows[0][0] is not None else None

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

        async def op(db: aiosqlite.Connection) -> int:
            cursor = await db.execute(query, params)
            return cursor.rowcount

        return await self._write(op)

    async def due_polls(self, source: str, now: float, limit: int) -> list[JobRow]:
        rows = await self._read(sql.DUE_POLLS, (source, now, limit))
        return [records.job_row(r) for r in rows]

    async def next_poll_at(self) -> float | None:
        rows = await self._read(sql.NEXT_POLL)
        return rows[0][0] if rows and rows[0][0] is not None else None

    async def schedule_poll(self, source: str, job_id: str, at: float, attempts: int) -> None:
        params = (at, attempts, source, job_id)
        await self._write_sync(sqlite_ops.execute, sql.SCHEDULE_POLL, params)

    async def acquire_lease(self, name: str, owner: str, ttl: float, now: float) -> bool:
        return await self._write_sync(sqlite_ops.acquire_lease, name, owner, now + ttl, now)

    async def dispatches_for(self, source: str, job_id: str) -> list[DispatchRow]:
        rows = await self._read(sql.SELECT_DISPATCHES_FOR, (source, job_id))
        return [records.dispatch_row(r) for r in rows]

    async def completion_for(self, source: str, job_id: str) -> CompletionRow | None:
        rows = await self._read(
            f"{sql.SELECT_COMPLETION} WHERE source = ? AND job_id = ?", (source, job_id)
        )
        return records.completion_row(rows[0]) if rows else None

    # Queries for the admin API (receiver.store.queries)

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobKey | None = None
    ) -> list[JobListing]:
        query, params = queries.list_jobs_query(where, limit, after)
        return [queries.listing_row(r) for r in await self._read(query, params)]

    async def deliveries_for(self, source: str, job_id: str) -> list[DeliveryRow]:
        rows = await self._read(queries.SELECT_DELIVERIES, (source, job_id))
        return [queries.delivery_row(r) for r in rows]

    async def job_stats(self, since: float) -> JobStats:
        return await queries.job_stats(self._read, since)

    async def completions_after(self, after_id: int, limit: int) -> list[CompletionRow]:
        rows = await self._read(queries.COMPLETIONS_AFTER, (after_id, limit))
        return [records.completion_row(r) for r in rows]

    async def last_completion_id(self) -> int:
        ((last,),) = await self._read(queries.LAST_COMPLETION_ID)
        return int(last)

    async def backlog(self) -> Backlog:
        (row,) = await self._read(queries.BACKLOG)
        return queries.backlog_row(row)

    async def purge(self, before: float, limit: int) -> tuple[int, list[str]]:
        return await self._write(lambda db: queries.purge(db, before, limit))

    async def delivered_results(self, limit: int) -> list[tuple[int, str]]:
        rows = await self._read(queries.DELIVERED_RESULTS, (limit,))
        return [(int(r[0]), str(r[1])) for r in rows]

    async def forget_results(self, completion_ids: Sequence[int]) -> int:
        if not completion_ids:
            return 0
        query, ids = queries.forget_results_query(len(completion_ids)), list(completion_ids)

        async def op(db: aiosqlite.Connection) -> int:
            return (await db.execute(query, ids)).rowcount

        return await self._write(op)


def _fail(ops: list[_Write], exc: Exception) -> None:
    if isinstance(exc, JobhookError):
        error: JobhookError = exc
    else:
        log.error("store_write_failed", error=str(exc), operations=len(ops))
        error = StoreUnavailableError(f"SQLite write failed: {exc}")
    for op in ops:
        if not op.future.done():
            op.future.set_exception(error)


def _fail_unpicklable(batch: list[_Write], exc: Exception) -> list[_Write]:
    """Fail each operation that does not pickle; the others, to be sent again."""
    rest = []
    for op in batch:
        try:
            pickle.dumps(op.sync, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            _fail([op], exc)
        else:
            rest.append(op)
    return rest


def _finish_batch(db: sqlite3.Connection) -> None:
    """On the SQLite thread: COMMIT what ``_run_here`` began (rolled back when it fails)."""
    try:
        db.execute("COMMIT")
    except Exception:
        with contextlib.suppress(Exception):
            db.execute("ROLLBACK")
        raise


async def _one(db: aiosqlite.Connection, query: str, params: Sequence[Any] = ()) -> Any:
    rows = list(await db.execute_fetchall(query, params))
    return rows[0]


async def _on_thread(db: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
    """``fn(connection, *args)`` on aiosqlite's thread, the one its connection belongs to.

    Through aiosqlite's ``_execute`` (the version is pinned): its public calls make one trip
    per statement, and a trip is the cost that group commit is there to share.
    """
    result: T = await db._execute(fn, db._conn, *args)  # type: ignore[no-untyped-call]
    return result
