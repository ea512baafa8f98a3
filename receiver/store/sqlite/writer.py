"""The SQLite store's writer process: it runs each group-committed batch and its COMMIT.

Why a process. Under load the event loop's thread is the service's bottleneck, and running a
webhook's statements there were a fifth of its cost (docs/performance.md), while the second
core sat mostly idle. A thread would not help: SQLite releases the GIL for each statement and
then waits for the loop's thread to hand it back, every statement (a batch took several times
its own work that way). A process has its own interpreter, so the statements run on the
other core and the loop pays only for a pickle each way.

The protocol, over a Unix socket pair, is frames of a 4-byte big-endian length and a pickle:

    parent -> child   [(op, args), ...]      op is a module-level function op(conn, *args);
                                             the batches are numbered 1, 2, ... as they come
    child -> parent   ("written", n)         batch n committed, its fsync slow: the next batch
                                             may come
                      (n, ("ok", [result, ...]))  batch n committed and on disk
                      (n, ("failed", index, error))  nothing committed (operation ``index``
                                             raised ``error``; index None: BEGIN/COMMIT), or
                                             committed but not made durable (the fsync failed)

A committed batch gets its reply once an fsync of the WAL that began after its COMMIT has
returned, and "written" before it when that fsync is slow (``Syncer``); a failed batch gets its
reply at once.
Its first frame says it is ready (``("ok", [])``) or why it could not open the database.
It exits when the socket closes, which is also what happens when its parent dies, and
ignores the signals its parent handles (``IGNORED_SIGNALS``). This module imports only what
the process needs (its parent's end is ``receiver.store.sqlite.writer_client``): it is the
process's whole footprint, with the operations it is sent (``receiver.store.sqlite.operations``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import sqlite3
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

Op = tuple["Callable[..., Any]", tuple[Any, ...]]
Reply = tuple[Any, ...]
HEADER = 4
IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The service's own signals: SIGINT and SIGTERM stop it, SIGHUP reloads its secrets.
``systemctl kill`` sends them to every process of the unit, this one too, whose default action
would end it and fail the batch in flight while the parent goes on writing (a reload) or still
writes (a graceful stop). Signals to the service's process group (``kill -s HUP -- -PGID``, a
terminal's Ctrl-C or hangup) do not reach it at all: its parent starts it in a session (so a
process group) of its own, and none can end it before these are ignored either."""
PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=FULL",
    "foreign_keys=ON",
    "busy_timeout=5000",
    "wal_autocheckpoint=24576",
)
"""The write connection's settings, the parent's and this process's alike. Checkpoints run on a
thread of the parent's (``receiver.store.sqlite.checkpoint``); a commit checkpoints only as a
backstop, past 24,576 pages of WAL (96 MiB; SQLite's default is 1,000), above where that thread
starts the WAL over."""


COMMIT_SYNC = "synchronous=NORMAL"
"""This process's COMMITs write the WAL and return; ``Syncer`` fsyncs it before any reply. With
NORMAL SQLite still fsyncs the WAL before each checkpoint copies from it, and the WAL's header
when it starts over: only the COMMIT's own fsync moves out of the write lock."""
SYNC_THREADS = 4
"""fsyncs of the WAL in flight at once, at most: one a committed batch, each on its own thread."""
PIPELINE_AFTER = 0.001
"""How long a committed batch waits for its fsync before the parent hears that it committed
and may send the next batch: most fsyncs are shorter, and then nothing changes (one reply a
batch, and the next batch gathers the webhooks that came meanwhile: fewer, larger commits);
a slow one no longer holds the next batch back."""


def connect(path: str | Path) -> sqlite3.Connection:
    """The write connection: autocommit (batches BEGIN themselves), WAL, fsync'd commits (the
    parent's; this process then sets ``COMMIT_SYNC`` and fsyncs with ``Syncer``)."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        for pragma in PRAGMAS:
            db.execute(f"PRAGMA {pragma}")
    except BaseException:
        db.close()
        raise
    return db


def run_batch(db: sqlite3.Connection, batch: Sequence[Op]) -> Reply:
    """One transaction for every operation of ``batch``: all commit, or none and the reply
    says which failed."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except Exception as exc:
        return ("failed", None, portable(exc))
    results: list[Any] = []
    try:
        for op, args in batch:
            results.append(op(db, *args))
        failed = None
        db.execute("COMMIT")
    except Exception as exc:
        failed = (len(results) if len(results) < len(batch) else None), exc
    if failed is not None:
        with contextlib.suppress(Exception):
            db.execute("ROLLBACK")
        return ("failed", failed[0], portable(failed[1]))
    return ("ok", results)


class Syncer:
    """Replies to each committed batch once its WAL frames are on disk, without holding the
    next batch back for the fsync.

    With the COMMIT's fsync inside it, a batch arriving while the one before waits for the disk
    waits for that fsync, then its own: on a disk where a checkpoint is writing random pages, a
    slow fsync (several milliseconds at the 99th percentile, docs/performance.md) is then two.
    Here the connection commits with ``COMMIT_SYNC``, and each COMMIT is followed by an fsync of
    the WAL file on one of ``SYNC_THREADS`` threads while the main thread takes the next batch:
    that batch is written at once and its fsync starts beside the slow one.

    An fsync makes durable everything written to the file before it began, so a batch is on
    disk once any fsync that began after its COMMIT returned: each fsync notes how many batches
    had committed when it began and, when it returns, sends the replies of all of those not yet
    sent (a later batch's fsync may return first and carry an earlier batch). A failed fsync
    fails every batch committed and not yet durable (their webhooks were not acknowledged: they
    come again, and the store answers a retry of one that did commit as a duplicate) and ends
    the process: after a failed fsync the kernel may have dropped the pages it could not write,
    so nothing more is committed on this connection, and the parent starts a new process.

    Other connections see a batch once it has committed, before its fsync returns: a read (the
    jobs API, the console) may show a webhook a few milliseconds before it is answered. A write
    that read it (a handler's claim of its delivery) commits after it, so that write's reply
    waits for an fsync that covers both: nothing acts on a batch before it is on disk."""

    def __init__(self, sock: socket.socket, wal: int, threads: int = SYNC_THREADS) -> None:
        self._sock = sock
        self._wal = wal
        self._lock = threading.Lock()  # the counts, the replies waiting and the socket's writes
        self._synced = threading.Condition(self._lock)
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="sqlite-wal-sync")
        self._committed = 0  # batches whose COMMIT has returned
        self._durable = 0  # batches known to be on disk
        self._waiting: dict[int, Reply] = {}  # committed, not yet known on disk: their replies
        self.failed: Exception | None = None
        """The fsync's error, once one failed."""

    def send(self, message: tuple[Any, ...]) -> None:
        """One frame to the parent (from any of this process's threads)."""
        data = frame(message)
        with self._lock:
            self._sendall(data)

    def committed(self, n: int, reply: Reply) -> None:
        """Batch ``n`` committed (``reply``): its reply goes once it is on disk; if that takes
        over ``PIPELINE_AFTER``, "written" goes first (the parent may send the next batch)."""
        with self._lock:
            if self.failed is not None:
                self._sendall(frame((n, ("failed", None, self.failed))))
                return
            self._waiting[n] = reply
            self._committed = n
        self._pool.submit(self._sync)
        with self._synced:
            answered = self._synced.wait_for(
                lambda: self._durable >= n or self.failed is not None, PIPELINE_AFTER
            )
            if not answered:
                self._sendall(frame(("written", n)))

    def close(self) -> None:
        """Wait for the fsyncs in flight and their replies."""
        self._pool.shutdown(wait=True)

    def _sync(self) -> None:
        with self._lock:
            if self.failed is not None or self._durable >= self._committed:
                return  # a later fsync has made these durable already
            target = self._committed
        try:
            os.fdatasync(self._wal)
        except OSError as exc:
            self._fail(exc)
            return
        with self._lock:
            if target <= self._durable:
                return
            self._durable = target
            for n in sorted(n for n in self._waiting if n <= target):
                self._sendall(frame((n, self._waiting.pop(n))))
            self._synced.notify_all()

    def _fail(self, exc: OSError) -> None:
        error = OSError(exc.errno, f"fsync of the SQLite WAL failed: {exc.strerror}")
        with self._lock:
            if self.failed is None:
                self.failed = error
            for n in sorted(self._waiting):
                self._sendall(frame((n, ("failed", None, error))))
            self._waiting.clear()
            self._synced.notify_all()
            with contextlib.suppress(OSError):  # the main loop's read ends: the process exits
                self._sock.shutdown(socket.SHUT_RDWR)

    def _sendall(self, data: bytes) -> None:
        """Under the lock. A parent gone is the main loop's to notice (its socket closes)."""
        with contextlib.suppress(OSError):
            self._sock.sendall(data)


def open_wal(db: sqlite3.Connection, path: str | Path) -> int:
    """A descriptor of the WAL file of ``db`` (open on ``path``), for ``Syncer``'s fsyncs. A read
    makes SQLite open the WAL, creating it if need be; while ``db`` stays open SQLite keeps
    that file (it removes it only when its last connection closes), so the descriptor and the
    connection write the same file. SQLite locks the shared-memory file, never the WAL, so
    another descriptor on it takes none of its locks away when it closes."""
    db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return os.open(f"{path}-wal", os.O_RDWR | os.O_CLOEXEC)


def portable(exc: Exception) -> Exception:
    """``exc`` when it survives a pickle, else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 (our own bytes)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _readframe(stream: BinaryIO) -> bytes | None:
    """The next batch's bytes; None once the parent's end is closed (or reset)."""
    try:
        return _read(stream)
    except OSError:
        return None


def _read(stream: BinaryIO) -> bytes | None:
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    size = int.from_bytes(header, "big")
    data = stream.read(size)
    return data if len(data) == size else None


def frame(reply: Reply) -> bytes:
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # a result that does not pickle: a bug, said as such
        data = pickle.dumps(("failed", None, RuntimeError(f"unpicklable reply: {exc}")))
    return len(data).to_bytes(HEADER, "big") + data


def serve(fd: int, path: str) -> int:
    """The writer process's loop: answer each batch on socket ``fd`` until it closes."""
    with socket.socket(fileno=fd) as sock:
        try:
            db = connect(path)
        except Exception as exc:
            sock.sendall(frame(("failed", None, portable(exc))))
            return 1
        try:
            db.execute(f"PRAGMA {COMMIT_SYNC}")
            wal = open_wal(db, path)
        except Exception as exc:
            db.close()
            sock.sendall(frame(("failed", None, portable(exc))))
            return 1
        syncer = Syncer(sock, wal)
        syncer.send(("ok", []))
        n = 0
        with sock.makefile("rb") as stream:
            while syncer.failed is None and (data := _readframe(stream)) is not None:
                n += 1
                try:
                    batch = pickle.loads(data)  # noqa: S301 (the parent's, over a private socket)
                except Exception as exc:
                    reply: Reply = ("failed", None, portable(exc))
                else:
                    reply = run_batch(db, batch)
                if reply[0] == "ok":
                    syncer.committed(n, reply)
                else:
                    syncer.send((n, reply))
        syncer.close()
        os.close(wal)
        db.close()
        return 0 if syncer.failed is None else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not args[0].isdigit():
        print("usage: python -m receiver.store.sqlite.writer FD DATABASE (started by jobhook)",
              file=sys.stderr)  # fmt: skip
        return 2
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    return serve(int(args[0]), args[1])


if __name__ == "__main__":
    sys.exit(main())
