"""The SQLite store's group commit: a bad operation fails alone, its neighbours commit."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from receiver.errors import StoreUnavailableError
from receiver.models import Event, State
from receiver.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from pathlib import Path


def _event(job_id: str, **metadata: object) -> Event:
    return Event(source="reducto", job_id=job_id, state=State.SUCCEEDED,
                 provider_status="Completed", via="webhook", message_id=f"m-{job_id}",
                 metadata=dict(metadata))  # fmt: skip


async def test_one_failing_operation_does_not_fail_the_rest_of_its_batch(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        events = [_event(f"ok-{n}") for n in range(10)]
        poison = _event("bad", unserialisable=object())
        results = await asyncio.gather(
            *(store.ingest(e, ["files"]) for e in [*events[:5], poison, *events[5:]]),
            return_exceptions=True,
        )
    finally:
        await store.close()
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1
    assert isinstance(failures[0], StoreUnavailableError)
    reopened = SQLiteStore(tmp_path / "s.db")
    await reopened.open()
    try:
        for event in events:
            assert await reopened.completion_for("reducto", event.job_id) is not None
        assert await reopened.get_job("reducto", "bad") is None
    finally:
        await reopened.close()


async def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.ingest(_event("late"), [])
