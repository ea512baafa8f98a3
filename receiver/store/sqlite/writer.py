"""The SQLite store's writer process: it runs each group-committed batch and its COMMIT.

Why a process. Under load the event loop's thread is the service's bottleneck, and running a
webhook's statements there were a fifth of its cost (docs/performance.md), while the second
core sat mostly idle. A thread would not help: SQLite releases the GIL for each statement and
then waits for the loop's thread to hand it back, every statement (a batch took several times
its own work that way). A process has its own interpreter, so the statements run on the
other core and the loop pays only for a pickle each way.

The protocol, over a Unix socket pair, is frames of a 4-byte big-endian length and a pickle:

    parent -> child   [(op, args), ...]      op is a module-level function op(conn, *args)
    child -> parent   ("ok", [result, ...])  all committed, in one transaction
                      ("failed", index, error)  nothing committed: operation ``index``
                                             raised ``error`` (index None: BEGIN/COMMIT)

Its first frame says it is ready (``("ok", [])``) or why it could not open the database.
It exits when the socket closes, which is also what happens when its parent dies, and
ignores the signals its parent handles (``IGNORED_SIGNALS``). This module imports only what
the process needs (its parent's end is ``receiver.store.sqlite.writer_client``): it is the
process's whole footprint, with the operations it is sent (``receiver.store.sqlite.operations``).
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import socket
import sqlite3
import sys
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


def connect(path: str | Path) -> sqlite3.Connection:
    """The write connection: autocommit (batches BEGIN themselves), WAL, fsync'd commits."""
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


def portable(exc: Exception) -> Exception:
    """``exc`` when it survives a pickle, else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 (our own bytes)
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _readframe(stream: BinaryIO) -> bytes | None:
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
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    try:
        db = connect(path)
    except Exception as exc:
        sock.sendall(frame(("failed", None, portable(exc))))
        return 1
    sock.sendall(frame(("ok", [])))
    with sock.makefile("rb") as stream:
        while (data := _readframe(stream)) is not None:
            try:
                batch = pickle.loads(data)  # noqa: S301 (the parent's, over a private socket)
            except Exception as exc:
                reply: Reply = ("failed", None, portable(exc))
            else:
                reply = run_batch(db, batch)
            sock.sendall(frame(reply))
    db.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not args[0].isdigit():
        print("usage: python -m receiver.store.sqlite.writer FD DATABASE (started by jobhook)",
              file=sys.stderr)  # fmt: skip
        return 2
    return serve(int(args[0]), args[1])


if __name__ == "__main__":
    sys.exit(main())
