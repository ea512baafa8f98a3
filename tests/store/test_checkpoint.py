"""WAL checkpoints run on the store's own thread, not in the writers' commits."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import TYPE_CHECKING

from receiver.models import Event, State
from receiver.store.checkpoint import Checkpointer
from receiver.store.sqlite import SQLiteStore

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
        assert store._db is not None
        ((pages,),) = await store._db.execute_fetchall("PRAGMA wal_autocheckpoint")
        assert pages == 16_384  # the writers' backstop, not SQLite's 1,000
        before = store._checkpointer.checkpoints
        await asyncio.gather(*(store.ingest(_event(n), ["files"]) for n in range(300)))
        for _ in range(100):
            if store._checkpointer.checkpoints > before:
                break
            await asyncio.sleep(0.05)
        assert store._checkpointer.checkpoints > before
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
