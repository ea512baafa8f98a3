"""The embedded store: one SQLite file in WAL mode, written by a single group-committing writer.

Every write is an operation queued to one writer task (``receiver.store.sqlite.group_commit``),
which runs whatever has queued up in one transaction and one fsync, so many concurrent webhooks
share a commit; a big batch runs in a writer process (``receiver.store.sqlite.writer``). Reads
use a connection of their own and never wait for the writer. This module is SQLite's connector;
the store's logic is the engine's (``receiver.store.engine``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite
import structlog

from receiver.errors import StoreUnavailableError
from receiver.store import codec
from receiver.store.connector import Connector
from receiver.store.engine import SQLEngine
from receiver.store.sqlite import operations, writer
from receiver.store.sqlite import sql as sqlite_sql
from receiver.store.sqlite.checkpoint import Checkpointer
from receiver.store.sqlite.group_commit import OFFLOAD_AT, GroupCommit
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS, statements
from receiver.store.sqlite.ownership import StoreLock
from receiver.store.sqlite.writer_client import WriterGoneError, WriterProcess

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence
    from pathlib import Path

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry
    from receiver.store.connector import Step, WalStats

T = TypeVar("T")
log = structlog.get_logger(__name__)


class SQLiteStore(SQLEngine):
    """SQLite: the default, for one process (the engine over ``SQLiteConnector``)."""

    connector: SQLiteConnector

    def __init__(self, path: Path, *, batch_max: int = 512, offload_at: int = OFFLOAD_AT) -> None:
        super().__init__(SQLiteConnector(path, batch_max=batch_max, offload_at=offload_at))
        self.path = path

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"


class SQLiteConnector(Connector):
    """One SQLite file. Writes go through ``sqlite3`` on a thread of the store's own
    (aiosqlite runs each statement as its own trip to its thread, and a trip is the cost group
    commit is there to share); reads through aiosqlite."""

    dialect = sqlite_sql.DIALECT

    def __init__(self, path: Path, *, batch_max: int = 512, offload_at: int = OFFLOAD_AT) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._reader: aiosqlite.Connection | None = None
        self._process = WriterProcess(path)
        self._lock = StoreLock(path)
        self._commits = GroupCommit(self._process, batch_max=batch_max, offload_at=offload_at)
        self._checkpointer = Checkpointer(path, hold=self._commits.held,
                                          batches=self._commits.batches)  # fmt: skip
        self._sql = self.dialect.sql

    def __repr__(self) -> str:
        return f"SQLiteConnector({str(self.path)!r})"

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

    async def read(
        self, query: str, params: Sequence[Any] = (), *, in_commit_order: bool = False
    ) -> list[Any]:
        # One writer commits in id order: every read is in commit order.
        if self._reader is None:
            raise StoreUnavailableError("the store is not open")
        try:
            rows = await self._reader.execute_fetchall(
                self._sql(query), operations.bindable(params)
            )
        except (sqlite3.Error, ValueError) as exc:
            raise StoreUnavailableError(f"SQLite read failed: {exc}") from exc
        return list(rows)

    async def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        return await self._commits.write(operations.changed, self._sql(query), params)

    async def write(self, program: Callable[..., Generator[Step, Any, T]], *args: Any) -> T:
        return await self._commits.write(operations.run, program, *args)

    async def ingest(
        self, event: Event, handlers: Sequence[str], resolve: bool, audit: AuditEntry | None
    ) -> IngestResult:
        args = (event, handlers, resolve, codec.now())
        return await self._commits.write(operations.ingest, *args, *((audit,) if audit else ()))

    async def ping(self) -> None:
        await self.read("SELECT 1")
        if not self._commits.running:
            raise StoreUnavailableError("the store writer is not running")

    def wal_stats(self) -> WalStats:
        """The checkpoint thread's figures: what keeping the WAL short costs, holds on the
        writes included."""
        return self._checkpointer.stats()


def _take_back_all(db: sqlite3.Connection) -> None:
    """We own the store: free every claim the processes before us left in it."""
    freed = 0
    db.execute("BEGIN IMMEDIATE")
    try:
        for number, statement in enumerate(sqlite_sql.TAKE_BACK_ALL):
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
