"""WAL checkpoints off the writer's critical path: a thread with a connection of its own.

SQLite's default checkpoints inside the COMMIT that takes the WAL past 1,000 pages: that commit
copies every page back into the database file and fsyncs it before it returns, and the batch
of webhooks waiting on it waits too. On a store of a million jobs each webhook dirties about
six B-tree pages (bench.storeprobe), so that was a commit every couple of hundred webhooks that
made the 99th percentile, and a share of the writer's CPU for every webhook. Here a thread
runs a PASSIVE checkpoint every ``interval`` on its own connection, while the writer goes on
committing (a PASSIVE checkpoint takes no lock a writer needs, and waits for none); the writers'
own automatic checkpoint stays, past 64 MiB of WAL (``writer.PRAGMAS``), for when this thread
cannot keep up.
SQLite releases the GIL while it checkpoints, so the event loop's thread does not wait for it.

Once a second while the last checkpoint copied fewer than ``BUSY_PAGES`` frames, every 0.1 s
while it copied more: each checkpoint that copies frames fsyncs the database file, and those
fsyncs share the disk with the commits' own. Run every 0.1 s whatever the load, a service taking
50 webhooks a second checkpointed about ten times as often as SQLite's default would have, and
the crash-ledger test (tests/reliability/test_crash_ledger.py) failed on this machine three
times in three (its sender drowned in unanswered requests); once a second whatever the load,
a saturating load filled the WAL to the writers' backstop between two rounds, which put the
checkpoint back into their commits (bench.storeprobe).

Starting the WAL over. SQLite rewinds the WAL only at a write that begins when every frame is
already copied, and under continuous load a commit always lands while a pass runs: the WAL grew
to the writers' backstop, and the commit that crossed it copied everything since this thread's
last pass and fsynced it, thousands of random pages (bench ingest: that one commit every 64 MiB
of WAL was the p99). So once the WAL holds
``RESTART_FRAMES``, this thread catches up with back-to-back passes until one copies fewer than
``CATCH_UP`` frames, then asks the store to hold its writes (``hold``: the group commit sends no
new batch and waits for the one in flight), copies the last frames, and lets the writes go: the
next write starts the WAL over. The writes wait for that last short pass only (a
``wal_checkpoint(RESTART)`` would do the same, but it waits for readers too, holding the writers
meanwhile, and the writers would poll for its lock).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from pathlib import Path

    Hold = Callable[[], AbstractContextManager[bool]]

INTERVAL = 1.0
BUSY_INTERVAL = 0.1
BUSY_PAGES = 1000
"""A checkpoint that copied this many frames (SQLite's default checkpoint size) means a busy
store: the next comes after ``BUSY_INTERVAL``."""
RESTART_FRAMES = 8192
"""A WAL this long (32 MiB of 4 KiB pages) is started over, under ``hold``."""
CATCH_UP = 512
"""Passes before the held one go on until one copies fewer frames than this..."""
CATCH_UP_PASSES = 6
"""...or this many have run."""
log = structlog.get_logger(__name__)


class Checkpointer:
    """A daemon thread that checkpoints the WAL of the database at ``path`` every ``interval``."""

    def __init__(self, path: Path, interval: float = INTERVAL, hold: Hold | None = None) -> None:
        self.path = path
        self.interval = interval
        self.hold = hold
        """Holds the store's writes while it is entered (True once none is in flight)."""
        self.restarts = 0
        """Passes made under ``hold`` that copied the whole WAL."""
        self.checkpoints = 0
        """Checkpoints that copied frames into the database file."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None

    def start(self) -> None:
        """Open the connection (an error here is the caller's) and start the thread."""
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA synchronous=FULL")  # a checkpoint fsyncs WAL, then database
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def checkpoint(self) -> tuple[int, int]:
        """One PASSIVE checkpoint: (frames in the WAL, frames copied into the database)."""
        assert self._conn is not None
        row = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(row[1]), int(row[2])

    def restart(self, copied: int) -> bool:
        """After a pass that left ``copied`` frames of a long WAL copied: catch up with
        back-to-back passes, then copy the rest with the writes held, so that the next write
        starts the WAL over (unless a reader is still reading from it). Whether the held pass
        copied everything."""
        if self.hold is None:
            return False
        for _ in range(CATCH_UP_PASSES):
            before = copied
            _, copied = self.checkpoint()
            if copied - before < CATCH_UP:
                break
        with self.hold() as held:
            if not held:
                return False
            frames, copied = self.checkpoint()
        if frames and frames == copied:
            self.restarts += 1
            return True
        return False

    def _run(self) -> None:
        done = 0  # frames of the current WAL already in the database
        failing = False
        wait = self.interval
        while not self._stop.wait(wait):
            restarted = False
            try:
                frames, copied = self.checkpoint()
                restarted = frames >= RESTART_FRAMES and self.restart(copied)
            except sqlite3.Error as exc:  # a full disk, say: the writers' backstop still runs
                if not failing:
                    log.warning("store_checkpoint_failed", error=str(exc))
                failing = True
                continue
            failing = False
            fresh = copied - done if copied >= done else copied  # the WAL started over
            if fresh > 0:
                self.checkpoints += 1
            done = copied if frames and not restarted else 0
            busy = fresh >= BUSY_PAGES or restarted
            wait = min(self.interval, BUSY_INTERVAL) if busy else self.interval
