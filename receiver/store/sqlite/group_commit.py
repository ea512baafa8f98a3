"""The SQLite store's group commit: one writer task, one transaction and one fsync a batch.

Every write is an operation queued to the writer task, which runs whatever has queued up in one
transaction and one fsync (group commit), so many concurrent webhooks share a commit. A big
batch runs in a writer process (``receiver.store.sqlite.writer``), off the event loop's core;
a small one here (``_run_here``). The store (``receiver.store.sqlite.store``) owns the
connection, the thread it belongs to and the process, and hands them to ``GroupCommit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from receiver.errors import JobhookError, StoreUnavailableError
from receiver.store.batching import take_batch
from receiver.store.sqlite.writer_client import encode

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator
    from concurrent.futures import Executor
    from contextlib import AbstractContextManager

    from receiver.store.sqlite.writer import Op, Reply
    from receiver.store.sqlite.writer_client import WriterProcess

T = TypeVar("T")
OFFLOAD_AT = 4
"""Batches of this many operations or more run in the writer process (``_commit``)..."""
OFFLOAD_RATE = 500
"""...and every batch does while the writes come this many a second or more (the last
second's count, or the one before it)."""
log = structlog.get_logger(__name__)


@dataclass(slots=True)
class _Write:
    op: Op
    """A module-level function and its arguments, run as ``fn(connection, *args)``."""
    future: asyncio.Future[Any]


class GroupCommit:
    """The writer task: queued operations, committed a batch at a time on the store's write
    connection, or in the writer process."""

    def __init__(self, process: WriterProcess, *, batch_max: int, offload_at: int,
                 offload_rate: int = OFFLOAD_RATE) -> None:  # fmt: skip
        self._process = process
        self._batch_max = batch_max
        self._offload_at = offload_at
        self._offload_rate = offload_rate
        self._second = 0.0  # when the current second's count began
        self._this_second = self._last_second = 0  # writes counted in it, and in the one before
        self._db: sqlite3.Connection | None = None
        self._thread: Executor | None = None
        self._queue: asyncio.Queue[_Write | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._gate = WriteGate()
        self._settling: set[asyncio.Task[None]] = set()  # batches committed, not yet on disk
        self._batches = self._writes = 0  # taken from the queue, since the start

    def batches(self) -> tuple[int, int]:
        """Batches taken from the queue so far, and the writes in them: how far the writer is
        behind (a queue forms only while a batch commits), from any thread (plain ints, each
        read atomic under the GIL)."""
        return self._batches, self._writes

    def held(self, timeout: float = 1.0) -> AbstractContextManager[bool]:
        """For another thread: no batch starts while inside (``WriteGate.held``)."""
        task = self._task
        loop = task.get_loop() if task is not None and not task.done() else None
        return self._gate.held(loop, timeout)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, db: sqlite3.Connection, thread: Executor) -> None:
        """Start the writer task on ``db``, the write connection (opened, migrated), whose
        COMMITs run on ``thread`` (one thread: the store's, where it opened ``db``)."""
        self._db, self._thread = db, thread
        self._task = asyncio.create_task(self._run(), name="sqlite-writer")

    async def stop(self) -> None:
        """Commit what is queued, then end the writer task."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None
        while self._settling:
            await asyncio.gather(*self._settling, return_exceptions=True)
        self._db = self._thread = None

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` in the next batch's transaction; its result once that
        commits. ``fn`` is a module-level function (it travels to the writer process by name)
        of picklable arguments (``receiver.store.sqlite.operations``).

        A caller that is cancelled while waiting does not cancel the write (the writer checks
        each future before setting it), so no shield is needed: one future per operation.
        """
        if self._task is None or self._task.done():
            raise StoreUnavailableError("the store is not open")
        future: asyncio.Future[T] = self._task.get_loop().create_future()
        self._queue.put_nowait(_Write((fn, args), future))
        return await future

    async def _run(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            await self._gate.enter()
            batch, stopping = take_batch(self._queue, first, self._batch_max)
            self._batches, self._writes = self._batches + 1, self._writes + len(batch)
            try:
                await self._commit(batch)
            finally:
                self._gate.leave()

    async def _commit(self, batch: list[_Write]) -> None:
        """Commit ``batch`` in one transaction: one bad operation fails alone and the rest
        commit; a failed BEGIN or COMMIT fails them all.

        A batch of ``offload_at`` operations or more runs in the writer process, off the event
        loop's core: batches that big mean webhooks are queueing for the loop (bench ingest at
        saturation: 16-32 a batch). So does every batch while writes come ``offload_rate`` a
        second or more: at a steady rate well below saturation the fsync is short, batches stay
        small, and their statements would run on the loop's thread between the requests it has
        to serve, delaying each of them (the fixed-rate phases of bench ingest,
        docs/performance.md). Otherwise a batch runs here, its statements on the loop's thread
        and only COMMIT (the fsync) on the store's thread: sparse writes (a poller's, a quiet
        service's) cost less that way than a trip to another process and back, which also
        wakes a process whose caches have gone cold (``bench poller`` uses more of a core with
        every batch sent there). Run on another thread, every statement would release the GIL
        inside SQLite and then wait for the loop's thread to hand it back: a batch took several
        times its own work that way.
        """
        busy = self._busy(len(batch))  # every batch counts toward the rate, big ones too
        if len(batch) >= self._offload_at or busy:
            reply = await self._offload(batch)
        else:
            reply = await self._run_here(batch)
        if reply is None:  # settled already, or to be once on disk
            return
        if reply[0] == "ok":
            _succeed(batch, reply[1])
            return
        index, error = reply[1], reply[2]
        if index is not None and len(batch) > 1:
            # One bad operation must not fail its neighbours: fail it, commit the rest.
            bad = batch[index]
            _fail([bad], error)
            await self._commit([op for op in batch if op is not bad])
            return
        _fail(batch, error)

    def _busy(self, writes: int) -> bool:
        """Count ``writes`` more in this second; whether this second or the one before reached
        ``offload_rate``."""
        now = time.monotonic()
        if now - self._second >= 1.0:
            gone = now - self._second >= 2.0  # a second with no write in it came between
            self._last_second = 0 if gone else self._this_second
            self._second, self._this_second = now, 0
        self._this_second += writes
        return max(self._this_second, self._last_second) >= self._offload_rate

    async def _run_here(self, batch: list[_Write]) -> Reply:
        """The batch's statements on the loop's thread, its COMMIT on the store's thread."""
        assert self._db is not None
        conn = self._db
        try:
            conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            return ("failed", None, exc)
        results: list[Any] = []
        try:
            for write in batch:
                fn, args = write.op
                results.append(fn(conn, *args))
        except Exception as exc:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            return ("failed", len(results), exc)
        try:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._thread, _finish_batch, conn)
        except Exception as exc:  # COMMIT failed (rolled back), or the connection is gone
            return ("failed", None, exc)
        return ("ok", results)

    async def _offload(self, batch: list[_Write]) -> Reply | None:
        """The batch in the writer process: its reply, once it is on disk or failed; None
        when it was settled here (it failed: a process that dies with the batch fails it all,
        nothing was acknowledged, so the webhooks are sent again, and the next batch starts a
        new process) or will be once on disk, by a task of its own, so that the next batch
        need not wait for this one's slow fsync (``writer.Syncer``)."""
        try:
            data = encode([write.op for write in batch])
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
            committed, done = self._process.send(data)
            await committed
            if done.done():
                return done.result()
        except Exception as exc:  # it is gone, or could not start: nothing was acknowledged
            _fail(batch, exc)
            return None
        task = asyncio.create_task(_settle(batch, done), name="sqlite-batch-on-disk")
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        return None


async def _settle(batch: list[_Write], done: asyncio.Future[Reply]) -> None:
    """A committed batch's reply, once on disk: its results, or (the fsync failed, or the
    process went) its failure, for the whole batch."""
    try:
        reply = await done
    except Exception as exc:
        _fail(batch, exc)
        return
    if reply[0] == "ok":
        _succeed(batch, reply[1])
    else:
        _fail(batch, reply[2])


def _succeed(ops: list[_Write], results: list[Any]) -> None:
    for op, result in zip(ops, results, strict=True):
        if not op.future.done():
            op.future.set_result(result)


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
            pickle.dumps(op.op, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            _fail([op], exc)
        else:
            rest.append(op)
    return rest


def _finish_batch(db: sqlite3.Connection) -> None:
    """On the store's thread: COMMIT what ``_run_here`` began (rolled back when it fails)."""
    try:
        db.execute("COMMIT")
    except Exception:
        with contextlib.suppress(Exception):
            db.execute("ROLLBACK")
        raise


class WriteGate:
    """Lets another thread hold the writes between two batches, briefly: open unless a thread
    holds it; the group commit passes it before every batch.

    The checkpoint thread (``receiver.store.sqlite.checkpoint``) starts the WAL over by copying
    its last frames while no commit lands. It waits for the batch in flight, never for the
    event loop's other work, and gives up after a timeout.
    """

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._busy = False
        self._quiet: threading.Event | None = None

    async def enter(self) -> None:
        """Before a batch (on the loop): wait while the gate is held."""
        if not self._open.is_set():
            await self._open.wait()
        self._busy = True

    def leave(self) -> None:
        """After a batch (on the loop): a thread waiting to hold the gate may go on."""
        self._busy = False
        if not self._open.is_set() and self._quiet is not None:
            self._quiet.set()

    @contextlib.contextmanager
    def held(self, loop: asyncio.AbstractEventLoop | None, timeout: float) -> Iterator[bool]:
        """From another thread: no batch starts while inside. True once the batch in flight
        (if any) has committed; False when that took over ``timeout`` or ``loop`` is gone."""
        quiet = threading.Event()
        try:
            if loop is None:
                raise RuntimeError("no loop")
            loop.call_soon_threadsafe(self._close, quiet)
        except RuntimeError:  # the store is closed, or closing
            yield False
            return
        try:
            yield quiet.wait(timeout)
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._open.set)

    def _close(self, quiet: threading.Event) -> None:
        self._open.clear()
        self._quiet = quiet
        if not self._busy:
            quiet.set()
