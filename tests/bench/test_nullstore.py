"""bench.nullstore is the ceiling of everything but the write only if it answers as the real
store does: the same webhooks, in the same order, get the same answers from both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.nullstore import NullIngestStore
from bench.storeprobe import events
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from pathlib import Path


async def test_nullstore_answers_the_realistic_mix_as_the_sqlite_store_does(tmp_path: Path) -> None:
    mix = events(600, seed=7)
    real, null = SQLiteStore(tmp_path / "real.db"), NullIngestStore(tmp_path / "null.db")
    await real.open()
    await null.open()
    try:
        answers = []
        for event in mix:
            ours, theirs = await real.ingest(event, []), await null.ingest(event, [])
            answers.append((ours.status, ours.completed, theirs.status, theirs.completed))
    finally:
        await null.close()
        await real.close()
    assert [a[:2] for a in answers] == [a[2:] for a in answers]
    statuses = {(a[0], a[1]) for a in answers}  # the mix has all three kinds of answer
    assert statuses == {("accepted", True), ("accepted", False), ("duplicate", False)}
