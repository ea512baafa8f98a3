"""WAL checkpoints off the writer's critical path: a thread with a connection of its own.

SQLite's default checkpoints inside the COMMIT that takes the WAL past 1,000 pages: that commit
copies every page back into the database file and fsyncs it before it returns, and the batch
of webhooks waiting on it waits too. On a store of a million jobs each webhook dirties about
six B-tree pages (bench.storeprobe), so that was a commit every couple of hundred webhooks that
made the 99th percentile, and a share of the writer's CPU for every webhook. Here a thread
runs a PASSIVE checkpoint every ``interval`` on its own connection, while the writer goes on
committing (a PASSIVE checkpoint takes no lock a writer needs, and waits for none); the writers'
own automatic checkpoint stays, past 96 MiB of WAL (``writer.PRAGMAS``), for when this thread
cannot keep up.
SQLite releases the GIL while it checkpoints, so the event loop's thread does not wait for it.

Once a second while fewer than ``BUSY_PAGES`` frames a second arrive; on a busier store, as
soon as about ``PASS_FRAMES`` have arrived since the pass before (``pace``). Each checkpoint that
copies frames fsyncs the database file, and those fsyncs share the disk with the commits' own.
Run every 0.1 s whatever the load, a service taking 50 webhooks a second checkpointed about ten
times as often as SQLite's default would have, and the crash-ledger test
(tests/reliability/test_crash_ledger.py) failed on this machine three times in three (its
sender drowned in unanswered requests); once a second whatever the load, a saturating load
filled the WAL to the writers' backstop between two rounds, which put the checkpoint back into
their commits (bench.storeprobe). And a pass's fsync sends every page it copied to the disk at
once, each to its own place in the file: a commit's small fsync issued meanwhile waits behind
them, so the size of a pass is the commits' fsync tail. Beside a loop of small appends and
fdatasyncs (the commits' pattern), the same random pages a second written as a few hundred a
pass made that fdatasync's 99th percentile several times what passes of a few dozen did
(docs/performance.md); hence small passes, often, on a busy store. But not more often than the
disk takes them: at saturation, passes every few milliseconds wrote the pages every commit
rewrites (the right edge of each time-ordered index) again and again, fell behind, and the
restart's catch-up then settled late, under holds of a quarter of a second. So the next pass
also waits ``DUTY`` times as long as the round's passes took: where the disk takes a small pass
quickly the frames set the pace, and where it is slow (a busy disk, a saturating load) the
passes widen by themselves, toward one every ``BUSY_INTERVAL``. And near saturation, where
webhooks queue for the writer while each batch commits (``batches``: ``QUEUED`` writes a batch
or more, over ``QUEUE_SECONDS``), every 0.1 s outright: there the service's cores are the bound,
and passes several times as often cost it throughput where few commits wait on the disk anyway
(the batches are big and few).

Starting the WAL over. SQLite rewinds the WAL only at a write that begins when every frame is
already copied, and under continuous load a commit always lands while a pass runs: the WAL grew
to the writers' backstop, and the commit that crossed it copied everything since this thread's
last pass and fsynced it, thousands of random pages (bench ingest: that one commit every 64 MiB
of WAL was the p99). So once the WAL holds ``RESTART_FRAMES``, this thread catches up with
back-to-back passes, then asks the store to hold its writes (``hold``: the group commit sends no
new batch and waits for the one in flight), copies the last frames, and lets the writes go: the
next write starts the WAL over (at rest, with the WAL copied whole and no write since, there is
nothing to hold: the next write starts it over all the same). The writes wait for that last
pass only (a
``wal_checkpoint(RESTART)`` would do the same, but it waits for readers too, holding the writers
meanwhile, and the writers would poll for its lock).

The held pass is a FULL checkpoint, which is a PASSIVE one that also waits, briefly
(``READERS_MS``), for readers still on an older snapshot: a reader pins the frames committed
after its snapshot began, so a PASSIVE pass that met one (a read of the store, such as the
metrics' backlog query, begun just before the hold) copied all but those, the WAL could not
start over, and the hold was spent for nothing; under a steady load the WAL then grew to the
writers' backstop, which copied it inside a commit. The writes are held already, so FULL's
writer lock is free.

How long the writes wait is how long that last pass takes, and a pass's time is mostly the
fsync of the pages it copied, each to its own place in the database file: on a large store
nearly every frame is a page of its own, so a pass's time grows with its frames. The held pass
copies what arrived during the pass before it, so the catch-up goes on until a pass copies no
more than ``SETTLED`` frames (each pass is shorter than the one before while the disk writes
faster than the webhooks come): then the held pass is as short as a pass gets. A WAL that does
not settle within ``CATCH_UP_SECONDS`` (the disk behind the load) is started over at a later
round, when it may, and under a longer hold as soon as a pass finds it ``FORCE_FRAMES`` long,
catch-up or not, before the writers' backstop would copy it inside a commit (at a steady half
of the saturated rate the WAL grows from the restart length to the backstop in well under the
catch-up's second).

What it costs is counted (``stats``, the metrics' ``jobhook_store_*``): the passes, the frames
they copied and their time; the restarts; and for each hold, how long the writes were held and
how many frames the held pass copied, since that is what a webhook arriving meanwhile waits
for. A few clock reads a pass, nothing a webhook: the figures are plain ints and floats that
only this thread rebinds, which the event loop reads at scrape time without a lock (in CPython
each read of one is atomic; a scrape may see a pass's count before its frames, never a torn
figure).
"""

from __future__ import annotations

import bisect
import contextlib
import sqlite3
import threading
import time
from typing import TYPE_CHECKING

import structlog

from receiver.store.connector import WalStats

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from pathlib import Path

    Hold = Callable[[], AbstractContextManager[bool]]
    Batches = Callable[[], tuple[int, int]]

INTERVAL = 1.0
BUSY_PAGES = 1000
"""Frames a second (SQLite's default checkpoint size a round of ``INTERVAL``) that make a busy
store: its passes are paced by ``PASS_FRAMES``."""
PASS_FRAMES = 64
"""On a busy store a pass comes as soon as about this many frames have arrived since the one
before, ``BUSY_INTERVAL`` apart at most and ``MIN_INTERVAL`` at least: each pass's fsync writes
a few dozen pages, never enough to stand in front of a commit's fsync for long."""
BUSY_INTERVAL = 0.1
MIN_INTERVAL = 0.004
QUEUED = 12
"""Writes a batch, on average over ``QUEUE_SECONDS``, that mean webhooks queue for the writer
while each batch commits, as under a saturating load; a steady rate below saturation gathers
a few a batch (docs/performance.md: the batches at each rate)."""
QUEUE_SECONDS = 0.5
"""The window the batches are averaged over: a burst of a few milliseconds is not a queue."""
DUTY = 3.0
"""A busy store's next pass waits at least this many times as long as the round's passes took:
the thread's passes keep to a quarter of the disk's time, or widen toward ``BUSY_INTERVAL``."""
RESTART_FRAMES = 16384
"""A WAL this long (64 MiB of 4 KiB pages) is started over, under ``hold``: each start costs a
hold, so the longer the WAL may grow, the fewer the holds."""
SETTLED = 32
"""Catch-up passes go on until one copies no more than this many frames..."""
CATCH_UP_SECONDS = 1.0
"""...for at most this long; a WAL not settled by then waits for a later round..."""
FORCE_FRAMES = 20480
"""...unless it holds this many frames (80 MiB): then it is started over under whatever hold
its last frames take, before the writers' backstop (``writer.PRAGMAS``, 96 MiB) would."""
READERS_MS = 100
"""How long the held pass waits for readers still on an older snapshot of the WAL (each read
of the store, the metrics' backlog query among them, is a short transaction)."""
HOLD_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""The holds' histogram buckets, in seconds: a hold is meant to last a batch's commit and one
short pass; one that gives up lasts its timeout, a second."""
log = structlog.get_logger(__name__)


class Checkpointer:
    """A daemon thread that checkpoints the WAL of the database at ``path`` every ``interval``."""

    def __init__(self, path: Path, interval: float = INTERVAL, hold: Hold | None = None,
                 batches: Batches | None = None) -> None:  # fmt: skip
        self.path = path
        self.wal = path.with_name(path.name + "-wal")
        """The database's WAL file (SQLite names it so)."""
        self.interval = interval
        self.hold = hold
        """Holds the store's writes while it is entered (True once none is in flight)."""
        self.batches = batches
        """The writer's batches so far and the writes in them (``GroupCommit.batches``)."""
        self._batches_seen = (0, 0)  # what ``batches`` answered when the window began
        self._window_at = 0.0  # when the current window of ``batches`` began
        self._queued_seen = False  # the last window's verdict
        self.restarts = 0
        """Passes made under ``hold`` that copied the whole WAL."""
        self.checkpoints = 0
        """Checkpoints that copied frames into the database file."""
        self.frames = 0
        """Frames those checkpoints copied."""
        self.seconds = 0.0
        """Time in passes, those that copied nothing included."""
        self.wal_frames = 0
        """Frames in the WAL at the last pass."""
        self.hold_frames = 0
        """Frames copied by the passes made under ``hold``."""
        self.hold_timeouts = 0
        """Holds that did not get the writes to themselves."""
        self.hold_seconds = 0.0
        """Time from asking for each hold to letting the writes go, summed."""
        self._hold_buckets = [0] * (len(HOLD_BOUNDS) + 1)
        self._done = 0  # frames of the current WAL already copied, at the last pass
        self._header = b""  # the WAL file's checkpoint sequence and salts, at the last pass
        self._seen = (-1, -1)  # what the last pass answered: (frames, copied)
        self.clock = time.monotonic
        """The rounds' clock (a test's own)."""
        self._round_at = 0.0  # when the last round began
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None

    def start(self) -> None:
        """Open the connection (an error here is the caller's) and start the thread."""
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA synchronous=FULL")  # a checkpoint fsyncs WAL, then database
        self._conn.execute(f"PRAGMA busy_timeout={READERS_MS}")  # the held pass only: FULL
        self._stop.clear()
        self._round_at = self.clock()
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

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int]:
        """One checkpoint: (frames in the WAL, frames of it copied into the database), counted.
        SQLite answers how much of the WAL is copied, by anyone: frames the writers' backstop
        copied since the last pass are counted with this one. PASSIVE waits for nothing;
        FULL, the held pass's, waits up to ``READERS_MS`` for readers on an older snapshot."""
        assert self._conn is not None
        started = time.monotonic()
        row = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        self.seconds += time.monotonic() - started
        frames, copied = int(row[1]), int(row[2])
        header, self._header = self._header, self._wal_header()
        started_over = header != self._header or copied < self._done
        fresh = copied if started_over else copied - self._done
        if fresh > 0:
            self.checkpoints += 1
            self.frames += fresh
        self._done, self.wal_frames = copied, frames
        return frames, copied

    def _wal_header(self) -> bytes:
        """The WAL file's checkpoint sequence and salts (bytes 12 to 24 of its header), which
        SQLite changes each time the WAL starts over: a pass that finds them changed copied
        frames of a new WAL, not more of the one before (at rest after a restart, the WAL still
        holds the frames copied before, and is not started over until the next write)."""
        try:
            with self.wal.open("rb") as file:
                return file.read(24)[12:]
        except OSError:  # not created yet, or gone with the last connection
            return b""

    def stats(self) -> WalStats:
        """The figures so far, from any thread (the metrics read them on the event loop's)."""
        try:
            wal_bytes = self.wal.stat().st_size
        except OSError:  # not created yet, or the store is gone
            wal_bytes = 0
        return WalStats(
            checkpoints=self.checkpoints,
            checkpoint_frames=self.frames,
            checkpoint_seconds=self.seconds,
            restarts=self.restarts,
            hold_bounds=HOLD_BOUNDS,
            hold_buckets=tuple(self._hold_buckets),  # one copy, under the GIL
            hold_seconds=self.hold_seconds,
            hold_frames=self.hold_frames,
            hold_timeouts=self.hold_timeouts,
            wal_frames=self.wal_frames,
            wal_bytes=wal_bytes,
        )

    def restart(self, copied: int) -> bool:
        """After a pass that left ``copied`` frames of a long WAL copied: catch up with
        back-to-back passes until one copies at most ``SETTLED`` frames, then copy the rest with
        the writes held, so that the next write starts the WAL over (unless a reader is still
        reading from it). Whether the held pass copied everything; False without a hold when
        the passes did not settle in time and the WAL is shorter than ``FORCE_FRAMES``."""
        if self.hold is None:
            return False
        # The length that called for this restart: what the log reports, since a catch-up pass
        # that copies every frame lets the next write start the WAL over by itself, and the held
        # pass may then see a new, short WAL.
        grown = self.wal_frames
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while True:
            last = copied
            frames, copied = self._pass()
            if copied - last <= SETTLED or frames >= FORCE_FRAMES:
                break  # settled; or long enough to start over now, before the backstop does
            if time.monotonic() >= deadline:
                return False  # the disk is behind: a later round, or the forced hold
        frames = copied = 0
        held, waited = False, 0.0
        before = self.frames
        asked = time.monotonic()
        try:
            with self.hold() as held:
                if held:
                    waited = time.monotonic() - asked  # for the batch in flight to commit
                    frames, copied = self._pass("FULL")
        finally:  # a pass that failed held the writes too
            seconds = time.monotonic() - asked
            under_hold = self.frames - before
            self._held(seconds, held, under_hold)
        if not (held and frames and frames == copied):
            return False
        self.restarts += 1  # the next write starts the WAL over (its header tells the next pass)
        log.debug("store_wal_restarted", held_seconds=round(seconds, 6),
                  waited_seconds=round(waited, 6), frames_copied=under_hold,
                  wal_frames=max(grown, frames))  # fmt: skip
        return True

    def _held(self, seconds: float, held: bool, frames: int) -> None:
        """Count one hold of ``seconds`` (the writes waited that long, whether it got them
        (``held``) or gave up) during which a pass copied ``frames``."""
        self._hold_buckets[bisect.bisect_left(HOLD_BOUNDS, seconds)] += 1
        self.hold_seconds += seconds
        self.hold_frames += frames
        if not held:
            self.hold_timeouts += 1

    def _pass(self, mode: str = "PASSIVE") -> tuple[int, int]:
        """``checkpoint``, remembering its answer for the next ``round`` to compare with."""
        self._seen = self.checkpoint(mode)
        return self._seen

    def round(self) -> float:
        """One pass, and the restart under a hold when the WAL is long, unless the store is at
        rest: a WAL copied whole that no write has touched since the pass before starts over at
        the next write by itself, so a store gone quiet after a burst is not held every
        ``BUSY_INTERVAL`` for a restart no write makes. (Under load a pass copies the whole WAL
        it saw too, while commits land behind it: those need the hold.) How long to wait before
        the next round; sqlite3.Error when the pass failed."""
        now = self.clock()
        elapsed, self._round_at = now - self._round_at, now
        queued = self._queued(now)
        before, seen, busy = self.frames, self._seen, self.seconds
        frames, copied = self._pass()
        fresh = self.frames - before  # the round's first pass: the held pass's are not the load's
        at_rest = copied == frames and (frames, copied) == seen
        restarted = frames >= RESTART_FRAMES and not at_rest and self.restart(copied)
        if queued:  # webhooks queue for the writer: a saturating load, passed as ever
            return min(self.interval, BUSY_INTERVAL)
        return self.pace(fresh, elapsed, restarted, self.seconds - busy)

    def _queued(self, now: float) -> bool:
        """Whether the writer's batches over the last window of ``QUEUE_SECONDS`` held
        ``QUEUED`` writes each or more on average: webhooks queue for it while each batch
        commits, as they do only near saturation."""
        if self.batches is None or now - self._window_at < QUEUE_SECONDS:
            return self._queued_seen
        (batches, writes), (seen, seen_writes) = self.batches(), self._batches_seen
        self._batches_seen, self._window_at = (batches, writes), now
        self._queued_seen = batches > seen and writes - seen_writes >= QUEUED * (batches - seen)
        return self._queued_seen

    def pace(
        self, fresh: int, elapsed: float, restarted: bool = False, spent: float = 0.0
    ) -> float:
        """How long until the next round, after one that copied ``fresh`` frames ``elapsed``
        seconds after the round before, its passes taking ``spent`` seconds. A store taking
        ``BUSY_PAGES`` frames a second or more (or one just started over) is passed often enough
        to copy ``PASS_FRAMES`` a pass: a pass's fsync sends every page it copied to the disk at
        once, each to its own place in the file, and a commit's small fsync waits behind them
        (docs/performance.md: the commits' fsync tail follows the pages a pass writes). But
        never sooner than ``DUTY`` times the round's own passes: a disk slow to take them is
        busy already (a saturating load), and small passes there write the same hot pages
        again and again and fall behind, so the pace widens by itself toward ``BUSY_INTERVAL``,
        whose larger passes write each page once. A quieter store is passed every
        ``interval``: each pass costs a fsync of its own."""
        rate = fresh / max(elapsed, MIN_INTERVAL)
        if not restarted and rate * INTERVAL < BUSY_PAGES:
            return self.interval
        ceiling = min(self.interval, BUSY_INTERVAL)
        if rate <= 0:
            return ceiling
        return min(max(PASS_FRAMES / rate, DUTY * spent, MIN_INTERVAL), ceiling)

    def _run(self) -> None:
        failing = False
        wait = self.interval
        while not self._stop.wait(wait):
            try:
                wait = self.round()
            except sqlite3.Error as exc:  # a full disk, say: the writers' backstop still runs
                if not failing:
                    log.warning("store_checkpoint_failed", error=str(exc))
                failing = True
                continue
            failing = False
