"""The PostgreSQL store's group commit of ingests: one round trip and one commit per batch.

``PostgresStore.ingest`` queues its event and waits for its answer. A writer task takes what
has queued (up to ``BATCH_MAX`` events) and stores it with one call of ``jobhook_ingest_batch``,
one statement, which PostgreSQL runs as a transaction of its own (no ``BEGIN`` or ``COMMIT``
round trips; ``receiver.store.postgres.ingest``); up to ``IN_FLIGHT`` batches run at once, on
separate pooled connections, so the server commits one while the next is sent. Within a batch
the events are ordered by (source, job id), stably, so one job's events keep their order and
concurrent batches (of this replica or another) lock the rows they share in the same order.

A batch PostgreSQL refuses for one of its events (a value it cannot store, not the server
being unreachable) runs again one event per transaction, so only the bad event fails. A caller
cancelled while waiting does not cancel the write: the batch runs on, its answer unread.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

import asyncpg  # type: ignore[import-untyped]
import structlog

from receiver.errors import StoreUnavailableError
from receiver.store import codec
from receiver.store.batching import take_batch
from receiver.store.postgres.ingest import Ingest, ingest_batch, ingest_one

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event, IngestResult
    from receiver.store.audit import AuditEntry
    from receiver.store.postgres.pool import PgPool

log = structlog.get_logger(__name__)
BATCH_MAX = 64
IN_FLIGHT = 4
# SQLSTATE classes that mean the server (not an event) is the trouble: connection exceptions,
# invalid transaction state (a read-only standby), rollbacks (deadlocks, after the pool's
# retries), insufficient resources, object not in prerequisite state, operator intervention
# (shutdown, cancel), system and internal errors.
_SERVER_CLASSES = frozenset({"08", "25", "40", "53", "55", "57", "58", "XX"})


class PgGroupCommit:
    """The writer task and the batches it has in flight."""

    def __init__(self, db: PgPool, *, batch_max: int = BATCH_MAX, in_flight: int = IN_FLIGHT):
        self._db = db
        self._batch_max = batch_max
        self._in_flight = in_flight
        self._queue: asyncio.Queue[Ingest | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.batches = 0
        """How many batches have been sent (tests read it to see events grouped)."""

    @property
    def running(self) -> bool:
        return not self._stopping and self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the writer task (the pool is open and migrated)."""
        self._stopping = False
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="postgres-ingest-writer")

    async def stop(self) -> None:
        """Store what is queued, wait for the batches in flight, then end the writer task."""
        if self._task is None:
            return
        self._stopping = True
        self._queue.put_nowait(None)
        task, self._task = self._task, None
        await task

    async def ingest(self, event: Event, handlers: Sequence[str], resolve: bool) -> IngestResult:
        if not self.running:
            raise StoreUnavailableError("the store is not open")
        future: asyncio.Future[IngestResult] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(Ingest(event, handlers, resolve, codec.now(), future))
        return await future

    async def _run(self) -> None:
        slots = asyncio.Semaphore(self._in_flight)
        flying: set[asyncio.Task[None]] = set()
        try:
            await self._take(slots, flying)
        finally:
            while not self._queue.empty():  # only if cancelled: stop() leaves none behind
                item = self._queue.get_nowait()
                if item is not None:
                    _fail(item, StoreUnavailableError("the store closed before storing this"))
            if flying:
                await asyncio.wait(flying)

    async def _take(self, slots: asyncio.Semaphore, flying: set[asyncio.Task[None]]) -> None:
        """Send batches until the stop mark; up to ``IN_FLIGHT`` at once."""
        stopping = False
        while not stopping:
            await slots.acquire()  # while every slot is busy, the next batch grows
            first = await self._queue.get()
            if first is None:
                break
            batch, stopping = take_batch(self._queue, first, self._batch_max)
            task = asyncio.create_task(self._commit(batch), name="postgres-ingest-batch")
            flying.add(task)
            task.add_done_callback(functools.partial(_landed, flying, slots))

    async def _commit(self, batch: list[Ingest]) -> None:
        ordered = sorted(batch, key=lambda item: item.key)  # sorted() is stable
        self.batches += 1
        try:
            try:
                store = functools.partial(ingest_batch, batch=ordered)
                results = await self._db.transaction(store, one_statement=True)
            except Exception as exc:  # PostgreSQL refused the batch, or its answer was odd
                if len(ordered) == 1 or not refused_input(exc):
                    raise
                log.warning("store_batch_refused", events=len(ordered), error=str(exc))
                await self._one_by_one(ordered)
                return
            for item, result in zip(ordered, results, strict=True):
                _answer(item, result)
        except Exception as exc:
            for item in ordered:
                _fail(item, exc)
        finally:  # cancelled (the loop is closing): nobody is left waiting for ever
            for item in ordered:
                _fail(item, StoreUnavailableError("the store closed before storing this"))

    async def _one_by_one(self, ordered: list[Ingest]) -> None:
        for item in ordered:
            try:
                result = await self._db.transaction(functools.partial(ingest_one, item=item))
            except Exception as exc:
                _fail(item, exc)
            else:
                _answer(item, result)

    async def ingest_alone(
        self, event: Event, handlers: Sequence[str], resolve: bool, audit: AuditEntry | None = None
    ) -> IngestResult:
        """Store one event in its own transaction, statement by statement, not queued: the
        path a refused batch falls back to (tests compare the batches with it), and an admin
        call's, whose ``audit`` row is written in that transaction."""
        loop = asyncio.get_running_loop()
        item = Ingest(event, handlers, resolve, codec.now(), loop.create_future())
        return await self._db.transaction(functools.partial(ingest_one, item=item, audit=audit))


def refused_input(exc: Exception) -> bool:
    """True when what failed is an event PostgreSQL (or asyncpg, encoding it) refused, or one
    whose answer could not be read, not the server: a batch that fails so is worth running
    again one event at a time."""
    if not isinstance(exc, StoreUnavailableError):
        return True  # e.g. a duplicate whose job is gone (purged meanwhile): State(None)
    cause = exc.__cause__
    if not isinstance(cause, asyncpg.PostgresError):
        return False  # a socket, a timeout, a closed connection or pool
    return (cause.sqlstate or "")[:2] not in _SERVER_CLASSES


def _landed(
    flying: set[asyncio.Task[None]], slots: asyncio.Semaphore, task: asyncio.Task[None]
) -> None:
    flying.discard(task)
    slots.release()


def _answer(item: Ingest, result: IngestResult) -> None:
    if not item.future.done():  # its caller may have been cancelled meanwhile
        item.future.set_result(result)


def _fail(item: Ingest, exc: BaseException) -> None:
    if not item.future.done():
        item.future.set_exception(exc)
