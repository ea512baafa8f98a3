"""WAL checkpoints run on the store's own thread, not in the writers' commits."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from receiver.models import Event, State
from receiver.store.sqlite import checkpoint
from receiver.store.sqlite.checkpoint import Checkpointer
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


def _event(n: int) -> Event:
    return Event("acme-docs", f"job-{n}", State.SUCCEEDED, "Completed", "webhook", f"msg-{n}",
                 {"user_id": str(n)})  # fmt: skip


async def test_the_store_checkpoints_on_its_thread_and_commits_leave_it_to_that(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        assert store.connector._db is not None
        ((pages,),) = store.connector._db.execute("PRAGMA wal_autocheckpoint").fetchall()
        assert pages == 24_576  # the writers' backstop, not SQLite's 1,000
        before = store.connector._checkpointer.checkpoints
        await asyncio.gather(*(store.ingest(_event(n), ["files"]) for n in range(300)))
        for _ in range(100):
            if store.connector._checkpointer.checkpoints > before:
                break
            await asyncio.sleep(0.05)
        assert store.connector._checkpointer.checkpoints > before
        rows = await store._read("SELECT count(*) FROM deliveries")
        assert rows[0][0] == 300
    finally:
        await store.close()
    assert not any(t.name == "sqlite-checkpoint" for t in threading.enumerate())


def test_a_checkpoint_copies_what_the_writers_left_in_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with sqlite3.connect(db, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(5000)])
        checkpointer = Checkpointer(db, interval=3600)  # no thread rounds: one call, here
        checkpointer.start()
        try:
            frames, copied = checkpointer.checkpoint()
        finally:
            checkpointer.stop()
        assert frames > 0
        assert copied == frames


async def test_a_held_store_starts_no_batch_until_the_thread_lets_go(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "h.db")
    await store.open()
    try:
        holding, release = threading.Event(), threading.Event()
        answers: list[bool] = []

        def hold() -> None:
            with store.connector._commits.held() as held:
                answers.append(held)
                holding.set()
                release.wait(10)

        thread = asyncio.create_task(asyncio.to_thread(hold))
        await asyncio.to_thread(holding.wait, 10)
        write = asyncio.ensure_future(store.ingest(_event(1), []))
        await asyncio.sleep(0.3)
        assert answers == [True]
        assert not write.done()  # queued behind the gate, not committed
        release.set()
        await thread
        async with asyncio.timeout(5):
            result = await write
        assert result.status == "accepted"
        assert (await store._read("SELECT count(*) FROM deliveries"))[0][0] == 1
    finally:
        await store.close()
    with store.connector._commits.held(timeout=0.1) as held:
        assert held is False  # a closed store has nothing to hold


async def test_a_long_wal_starts_over_while_webhooks_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "RESTART_FRAMES", 64)
    monkeypatch.setattr(checkpoint, "INTERVAL", 0.05)
    store = SQLiteStore(tmp_path / "r.db")
    monkeypatch.setattr(store.connector._checkpointer, "interval", 0.05)
    await store.open()
    sent = 0
    try:
        async with asyncio.timeout(30):
            while store.connector._checkpointer.restarts < 2:
                await asyncio.gather(
                    *(store.ingest(_event(sent + n), ["files"]) for n in range(50))
                )
                sent += 50
        # A restart is counted once the held pass copied the whole WAL; the next write starts
        # it over (the loop may end before any came).
        assert (await store.ingest(_event(sent), ["files"])).status == "accepted"
        sent += 1
        with sqlite3.connect(store.path) as conn:  # what the WAL holds now
            _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        high_water = (tmp_path / "r.db-wal").stat().st_size // (4096 + 24)  # never shrinks
        assert high_water >= 64
        assert frames < high_water  # it started over instead of growing by every webhook
        assert (await store._read("SELECT count(*) FROM deliveries"))[0][0] == sent
        assert (await store._read("SELECT count(*) FROM dispatches"))[0][0] == sent
    finally:
        await store.close()


async def test_a_store_at_rest_after_a_burst_is_not_held_for_again_and_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "RESTART_FRAMES", 64)
    store = SQLiteStore(tmp_path / "r.db")
    checkpointer = store.connector._checkpointer
    monkeypatch.setattr(checkpointer, "interval", 0.02)
    passes = 0
    real_pass = checkpointer._pass

    def counted(mode: str = "PASSIVE") -> tuple[int, int]:
        nonlocal passes
        passes += 1
        return real_pass(mode)

    monkeypatch.setattr(checkpointer, "_pass", counted)
    counted_at_restart: list[int] = []  # frames counted as copied, once the restart's pass is
    real_restart = checkpointer.restart

    def restart(copied: int) -> bool:
        restarted = real_restart(copied)
        counted_at_restart.append(checkpointer.frames)
        return restarted

    monkeypatch.setattr(checkpointer, "restart", restart)
    await store.open()
    try:
        checkpointer.stop()  # no pass while the burst lands: it leaves a long WAL
        for burst in range(10):  # a commit each, at least: a WAL of well over 64 frames
            await asyncio.gather(
                *(store.ingest(_event(burst * 30 + n), ["files"]) for n in range(30))
            )
        checkpointer.start()
        async with asyncio.timeout(30):
            while passes < 10:  # the burst's restart, under a hold; then passes with no write
                await asyncio.sleep(0.01)
        assert checkpointer.restarts == 1
        assert checkpointer.wal_frames >= 64  # still the burst's WAL: no write started it over
        # the passes after the restart find the same WAL, copied: nothing more is counted
        assert counted_at_restart == [checkpointer.frames]
        await store.ingest(_event(300), ["files"])  # the next write starts the WAL over itself
        async with asyncio.timeout(30):  # a pass finds the new WAL copied: its frames count
            while checkpointer.frames == counted_at_restart[0]:
                await asyncio.sleep(0.01)
        checkpointer.stop()  # no pass between the reads below
        # Counted since the restart: the new WAL's frames as the last pass found them copied,
        # not the burst's counted again (a write after the test's own would add its frames,
        # so the checkpointer's last pass is the measure, not a pass of the test's).
        assert checkpointer.wal_frames < 64  # the write started the WAL over
        assert 0 < checkpointer.frames - counted_at_restart[0] == checkpointer._done
    finally:
        await store.close()


def _writer(db: Path) -> sqlite3.Connection:
    """A connection writing to ``db`` in WAL mode, never checkpointing itself. Keep it open:
    the last connection to close would copy the WAL back and delete it."""
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    return conn


def _write(conn: sqlite3.Connection, rows: int) -> None:
    """About ``rows`` frames of WAL: a page a row, in one commit."""
    conn.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO t SELECT zeroblob(3000) FROM n",
        (rows,),
    )


def test_a_checkpoint_counts_its_frames_and_time_and_an_empty_one_only_its_time(
    tmp_path: Path,
) -> None:
    db = tmp_path / "c.db"
    conn = _writer(db)
    _write(conn, 200)
    checkpointer = Checkpointer(db, interval=3600)  # no thread rounds: calls here
    checkpointer.start()
    try:
        frames, copied = checkpointer.checkpoint()
        first = checkpointer.stats()
        checkpointer.checkpoint()  # nothing new to copy
        second = checkpointer.stats()
    finally:
        checkpointer.stop()
        conn.close()
    assert frames >= 200
    assert (first.checkpoints, first.checkpoint_frames) == (1, copied)
    assert first.wal_frames == frames
    assert first.wal_bytes >= frames * 4096
    assert first.checkpoint_seconds > 0
    assert (second.checkpoints, second.checkpoint_frames) == (1, copied)
    assert second.checkpoint_seconds > first.checkpoint_seconds
    assert (second.restarts, sum(second.hold_buckets), second.hold_timeouts) == (0, 0, 0)


def test_a_hold_is_timed_and_counted_whether_it_gets_the_writes_or_gives_up(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.db"
    conn = _writer(db)
    _write(conn, 200)
    answers = [False, True]

    @contextlib.contextmanager
    def hold() -> Iterator[bool]:
        time.sleep(0.02)  # as a batch in flight would keep it waiting...
        held = answers.pop(0)
        if held:
            _write(conn, 100)  # ...and commit: frames for the held pass
        yield held

    checkpointer = Checkpointer(db, interval=3600, hold=hold)
    checkpointer.start()
    try:
        assert checkpointer.restart(0) is False  # gave up: nothing copied under it
        gave_up = checkpointer.stats()
        assert checkpointer.restart(0) is True
        held = checkpointer.stats()
    finally:
        checkpointer.stop()
        conn.close()
    assert (gave_up.hold_timeouts, sum(gave_up.hold_buckets), gave_up.restarts) == (1, 1, 0)
    assert gave_up.hold_frames == 0
    assert gave_up.hold_seconds >= 0.02
    assert (held.hold_timeouts, sum(held.hold_buckets), held.restarts) == (1, 2, 1)
    assert held.hold_frames >= 100
    assert held.checkpoint_frames == gave_up.checkpoint_frames + held.hold_frames
    assert held.hold_seconds >= 0.04
    assert held.hold_buckets[0] == 0  # none under a millisecond: each waited 20 ms
    assert len(held.hold_buckets) == len(held.hold_bounds) + 1


class _Log:
    """The checkpoint module's log, recording each call's level and event."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        def record(event: str, **fields: Any) -> None:
            self.calls.append((level, event, fields))

        return record


async def test_restarts_under_load_are_counted_timed_and_logged_at_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "RESTART_FRAMES", 64)
    recorded = _Log()
    monkeypatch.setattr(checkpoint, "log", recorded)
    store = SQLiteStore(tmp_path / "r.db")
    monkeypatch.setattr(store.connector._checkpointer, "interval", 0.05)
    await store.open()
    sent = 0
    try:
        assert store.wal_stats() == store.connector._checkpointer.stats()
        async with asyncio.timeout(30):
            while store.connector._checkpointer.restarts < 2:
                await asyncio.gather(
                    *(store.ingest(_event(sent + n), ["files"]) for n in range(50))
                )
                sent += 50
        stats = store.wal_stats()
    finally:
        await store.close()
    assert stats is not None
    assert stats.restarts >= 2
    holds = sum(stats.hold_buckets)
    assert holds >= stats.restarts + stats.hold_timeouts
    assert stats.hold_seconds > 0
    # A held pass copies what committed after the catch-up before it: nothing, when no batch
    # landed in between (this test writes in bursts, each awaited), so the count may be zero.
    assert stats.hold_frames <= stats.checkpoint_frames
    assert stats.checkpoints >= stats.restarts
    assert stats.wal_bytes >= 64 * 4096
    restarted = [call for call in recorded.calls if call[1] == "store_wal_restarted"]
    assert len(restarted) == stats.restarts
    assert {level for level, _, _ in restarted} == {"debug"}
    fields = restarted[0][2]
    assert set(fields) == {"held_seconds", "waited_seconds", "frames_copied", "wal_frames"}
    assert fields["wal_frames"] >= 64
    assert 0 <= fields["waited_seconds"] <= fields["held_seconds"]


class _Passes:
    """Stands in for a checkpointer's passes: each call copies the next of ``copies`` frames
    (cumulative, as SQLite answers), the WAL holding ``frames``; ``held`` records the passes
    made under the hold."""

    def __init__(self, checkpointer: Checkpointer, frames: int, copies: list[int],
                 delay: float = 0.0) -> None:  # fmt: skip
        self.checkpointer, self.frames, self.copies, self.delay = (
            checkpointer,
            frames,
            copies,
            delay,
        )
        self.calls = 0
        self.held: list[int] = []
        self.holding = False

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int]:
        time.sleep(self.delay)
        copied = self.copies[min(self.calls, len(self.copies) - 1)]
        self.calls += 1
        if self.holding:
            self.held.append(self.calls)
            copied = self.frames  # under the hold nothing new arrives: the pass copies the rest
        return self.frames, copied

    @contextlib.contextmanager
    def hold(self) -> Iterator[bool]:
        self.holding = True
        try:
            yield True
        finally:
            self.holding = False


def _scripted(monkeypatch: pytest.MonkeyPatch, frames: int, copies: list[int],
              delay: float = 0.0) -> tuple[Checkpointer, _Passes]:  # fmt: skip
    checkpointer = Checkpointer(Path("unused.db"), interval=3600)
    passes = _Passes(checkpointer, frames, copies, delay)
    checkpointer.hold = passes.hold
    monkeypatch.setattr(checkpointer, "checkpoint", passes.checkpoint)
    return checkpointer, passes


def test_the_catch_up_goes_on_until_a_pass_copies_few_frames_then_holds_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each pass copies what arrived during the one before: 600, 280, then SETTLED frames
    checkpointer, passes = _scripted(
        monkeypatch, 20_000, [9_600, 9_880, 9_880 + checkpoint.SETTLED]
    )
    assert checkpointer.restart(9_000) is True
    assert passes.calls == 4  # three catch-up passes, the last within SETTLED, then the held one
    assert passes.held == [4]
    assert checkpointer.restarts == 1


def test_a_long_wal_at_rest_is_held_for_once_then_left_to_the_next_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A burst ends: the round after it copies the WAL's last frames and restarts it under a hold,
    # as under load. Then nothing changes, pass after pass: the next write starts the WAL over
    # by itself, so no more holds (each took the writes and counted a restart no write made)
    # and the rounds go back to the quiet pace.
    long_wal = checkpoint.RESTART_FRAMES
    checkpointer, passes = _scripted(monkeypatch, long_wal, [long_wal])
    rounds = [checkpointer.round() for _ in range(4)]
    assert rounds == [checkpoint.BUSY_INTERVAL] + [checkpointer.interval] * 3
    assert passes.held == [3]  # the first round's pass, its catch-up pass, the held one
    assert passes.calls == 6
    assert checkpointer.restarts == 1
    # under load a pass copies the whole WAL it saw while commits land behind it: each round
    # sees a longer WAL, and each is held for
    checkpointer, passes = _scripted(monkeypatch, long_wal, [long_wal])
    for n in range(3):
        passes.frames = passes.copies[0] = long_wal + 100 * n
        assert checkpointer.round() == checkpoint.BUSY_INTERVAL
    assert len(passes.held) == 3
    assert checkpointer.restarts == 3


def test_a_wal_that_does_not_settle_in_time_is_not_held_for_until_it_is_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(checkpoint, "CATCH_UP_SECONDS", 0.05)
    growing = [1_000 * n for n in range(1, 200)]  # every pass copies 1,000 new frames
    short = checkpoint.FORCE_FRAMES - 1
    checkpointer, passes = _scripted(monkeypatch, short, growing, delay=0.01)
    assert checkpointer.restart(0) is False
    assert passes.held == []  # no hold: the held pass would copy a thousand frames
    assert checkpointer.restarts == 0
    assert sum(checkpointer.stats().hold_buckets) == 0
    long_wal = checkpoint.FORCE_FRAMES
    checkpointer, passes = _scripted(monkeypatch, long_wal, growing, delay=0.01)
    assert checkpointer.restart(0) is True  # long enough to start over under a longer hold
    assert len(passes.held) == 1


def test_a_wal_found_long_during_the_catch_up_is_held_for_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At a steady rate the WAL can grow from the restart length past FORCE_FRAMES while the
    # catch-up runs: waiting out the catch-up's deadline would let it reach the writers'
    # backstop, which copies it inside a commit. The pass that finds it that long ends the
    # catch-up, whatever the deadline.
    monkeypatch.setattr(checkpoint, "CATCH_UP_SECONDS", 60.0)
    growing = [1_000 * n for n in range(1, 200)]  # every pass copies 1,000 new frames
    checkpointer, passes = _scripted(monkeypatch, checkpoint.FORCE_FRAMES, growing)
    started = time.monotonic()
    assert checkpointer.restart(0) is True
    assert time.monotonic() - started < 5.0
    assert passes.calls == 2  # the pass that found the WAL that long, then the held one
    assert passes.held == [2]
    assert checkpointer.restarts == 1


def test_the_held_pass_waits_for_a_reader_on_an_older_snapshot_and_starts_the_wal_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read begun before the hold pins the frames committed after its snapshot: a pass that
    # does not wait for it copies all but those, and the hold is spent without a restart.
    db = tmp_path / "r.db"
    writer = sqlite3.connect(db, isolation_level=None)
    reader = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE t (x)")
        writer.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(2000)])
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (2000,)  # its snapshot
        writer.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(2000)])
        ended: list[float] = []

        def end_the_read() -> None:
            reader.execute("COMMIT")
            ended.append(time.monotonic())

        @contextlib.contextmanager
        def hold() -> Iterator[bool]:
            threading.Timer(0.05, end_the_read).start()  # the read ends while the writes wait
            yield True

        monkeypatch.setattr(checkpoint, "READERS_MS", 10_000)  # however late the timer fires
        checkpointer = Checkpointer(db, interval=3600, hold=hold)
        checkpointer.start()
        try:
            _, copied = checkpointer.checkpoint()  # a pass before the hold: the reader pins
            frames = checkpointer.wal_frames
            assert copied < frames
            assert checkpointer.restart(copied) is True
            assert ended  # the held pass waited for the read to end
            assert checkpointer.restarts == 1
        finally:
            checkpointer.stop()
        writer.execute("INSERT INTO t VALUES (0)")  # the next write starts the WAL over
        _, wal_frames, _ = writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert wal_frames < frames
    finally:
        reader.close()
        writer.close()


def test_a_busy_store_is_passed_in_small_passes_unless_its_disk_is_slow() -> None:
    # A pass's fsync sends every page it copied to the disk at once, and a commit's fsync
    # waits behind them: the pace keeps each pass near PASS_FRAMES, within its bounds.
    checkpointer = Checkpointer(Path("unused.db"))
    pace = checkpointer.pace
    assert pace(350, 1.0) == checkpointer.interval  # 50 webhooks a second: once a second
    assert pace(0, 1.0) == checkpointer.interval
    assert pace(5_000, 1.0) == pytest.approx(checkpoint.PASS_FRAMES / 5_000)  # a burst begins
    assert pace(1_000, 1.0) == pytest.approx(checkpoint.PASS_FRAMES / 1_000)  # busy, at the edge
    busy = pace(14_000, 1.0)  # a quarter of a fast machine's saturated rate
    assert checkpoint.MIN_INTERVAL < busy < checkpoint.BUSY_INTERVAL
    assert 14_000 * busy == pytest.approx(checkpoint.PASS_FRAMES)
    assert pace(400, 0.004) == checkpoint.MIN_INTERVAL  # 100,000 frames a second: the floor
    assert pace(100, 0.0001) == checkpoint.MIN_INTERVAL  # a round soon after the last
    assert pace(0, 0.5, restarted=True) == checkpoint.BUSY_INTERVAL  # just started over
    # A disk slow to take the passes (a saturating load) widens the pace by itself.
    assert pace(14_000, 1.0, spent=0.01) == pytest.approx(checkpoint.DUTY * 0.01)
    assert pace(14_000, 1.0, spent=0.001) == pytest.approx(busy)  # a quick pass: frames pace
    assert pace(14_000, 1.0, spent=0.5) == checkpoint.BUSY_INTERVAL  # a catch-up: the ceiling
    quick = Checkpointer(Path("unused.db"), interval=0.002)  # a test's pace is never slowed
    assert quick.pace(5_000, 0.002) == quick.pace(0, 1.0) == 0.002


async def test_the_thread_paces_its_passes_by_the_frames_that_arrive(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    await store.open()
    waits: list[float] = []
    checkpointer = store.connector._checkpointer
    paced = checkpointer.round

    def round_() -> float:
        waits.append(paced())
        return waits[-1]

    checkpointer.round = round_  # type: ignore[method-assign]
    try:
        sent = 0
        async with asyncio.timeout(30):
            while not any(wait < checkpoint.BUSY_INTERVAL for wait in waits):
                for n in range(50):  # one at a time, as at a steady rate: no queue
                    await store.ingest(_event(sent + n), ["files"])
                sent += 50
        assert checkpointer.checkpoints >= 1
        assert (await store._read("SELECT count(*) FROM deliveries"))[0][0] == sent
        batches, writes = store.connector._commits.batches()
        assert writes < checkpoint.QUEUED * batches  # one at a time: no queue
        await asyncio.gather(*(store.ingest(_event(sent + n), ["files"]) for n in range(64)))
        more, written = store.connector._commits.batches()
        assert written - writes >= checkpoint.QUEUED * (more - batches)  # these queued
    finally:
        await store.close()
    assert checkpoint.MIN_INTERVAL <= min(waits) < checkpoint.BUSY_INTERVAL


def test_a_queue_at_the_writer_passes_a_busy_store_every_busy_interval(tmp_path: Path) -> None:
    # Near saturation webhooks queue for the writer while each batch commits: small passes
    # there cost the service its throughput, so the pace is 0.1 s, as it was before them. The
    # batches are averaged over a window, a burst is not a queue.
    db = tmp_path / "q.db"
    conn = _writer(db)
    taken, now = (0, 0), 0.0
    checkpointer = Checkpointer(db, interval=3600, batches=lambda: taken)
    checkpointer.clock = lambda: now
    paces: list[int] = []

    def pace(fresh: int, elapsed: float, restarted: bool = False, spent: float = 0.0) -> float:
        paces.append(fresh)
        return 0.005  # what the frames would ask for

    def round_(writes: int, batches: int, seconds: float) -> float:
        nonlocal taken, now
        _write(conn, 20)
        taken, now = (taken[0] + batches, taken[1] + writes), now + seconds
        return checkpointer.round()

    checkpointer.pace = pace  # type: ignore[method-assign]
    checkpointer.start()
    try:
        small = round_(180, 100, checkpoint.QUEUE_SECONDS)  # 1.8 writes a batch: no queue
        queued = round_(checkpoint.QUEUED * 40, 40, checkpoint.QUEUE_SECONDS)  # a queue
        within = round_(20, 20, 0.01)  # within the window: the queue's verdict stands
        drained = round_(30, 20, checkpoint.QUEUE_SECONDS)  # a new window, no queue
        burst = round_(checkpoint.QUEUED * 40, 40, 0.01)  # a burst within the window...
        over = round_(100, 80, checkpoint.QUEUE_SECONDS)  # ...averaged over it: no queue
        idle = round_(0, 0, checkpoint.QUEUE_SECONDS)  # no batch at all: nothing queued
    finally:
        checkpointer.stop()
        conn.close()
    busy, frames = checkpoint.BUSY_INTERVAL, 0.005
    assert (small, queued, within) == (frames, busy, busy)
    assert (drained, burst, over, idle) == (frames, frames, frames, frames)
    assert len(paces) == 5
