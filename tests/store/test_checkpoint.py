"""WAL checkpoints run on the store's own thread, not in the writers' commits."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import TYPE_CHECKING

import pytest

from receiver.models import Event, State
from receiver.store.sqlite import checkpoint
from receiver.store.sqlite.checkpoint import Checkpointer
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from pathlib import Path


def _event(n: int) -> Event:
    return Event("reducto", f"job-{n}", State.SUCCEEDED, "Completed", "webhook", f"msg-{n}",
                 {"user_id": str(n)})  # fmt: skip


async def test_the_store_checkpoints_on_its_thread_and_commits_leave_it_to_that(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        assert store.connector._db is not None
        ((pages,),) = store.connector._db.execute("PRAGMA wal_autocheckpoint").fetchall()
        assert pages == 16_384  # the writers' backstop, not SQLite's 1,000
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
        with sqlite3.connect(store.path) as conn:  # what the WAL holds now
            _, frames, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        high_water = (tmp_path / "r.db-wal").stat().st_size // (4096 + 24)  # never shrinks
        assert high_water >= 64
        assert frames < high_water  # it started over instead of growing by every webhook
        assert (await store._read("SELECT count(*) FROM deliveries"))[0][0] == sent
        assert (await store._read("SELECT count(*) FROM dispatches"))[0][0] == sent
    finally:
        await store.close()
