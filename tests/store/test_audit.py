"""The audit trail on every backend: actions started then finished, or written finished in their
effect's own transaction (and no effect without its row), refusals counted on one row per
address and reason, pages newest first, and retention that keeps rows of kept jobs."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import pytest

from receiver.errors import StoreUnavailableError
from receiver.models import Event, State
from receiver.store.audit import REFUSAL_BUCKET_SECONDS, AuditEntry, AuditFilter
from tests.adminsupport import inject_fault

if TYPE_CHECKING:
    from receiver.store import Store

T0 = 1_700_000_000.0


def _entry(at: float = T0, **changes: str) -> AuditEntry:
    values = {"token": "ops", "role": "operate", "action": "replay_job",
              "target": "reducto/j1", "request_id": "r1", "client": "10.0.0.1"}  # fmt: skip
    values.update(changes)
    source, _, job_id = values["target"].partition("/")
    return AuditEntry(at=at, source=source or None, job_id=job_id or None, **values)


async def test_an_action_is_started_then_finished(store: Store) -> None:
    audit_id = await store.audit_start(_entry())
    (row,) = await store.audit_rows(AuditFilter(), after_id=None, limit=10)
    assert (row.id, row.outcome, row.jobs) == (audit_id, "started", None)
    await store.audit_finish(audit_id, "ok", jobs=3, ref="rp1", now=T0 + 1)
    (row,) = await store.audit_rows(AuditFilter(), after_id=None, limit=10)
    assert (row.outcome, row.jobs, row.ref, row.last_at) == ("ok", 3, "rp1", T0 + 1)
    assert (row.token, row.role, row.client, row.request_id) == ("ops", "operate", "10.0.0.1", "r1")


async def test_refusals_from_one_address_share_a_row_per_reason_and_hour(store: Store) -> None:
    for i in range(50):
        await store.audit_refused(_entry(T0 + i, token="", role=""), "unauthorized")
    await store.audit_refused(_entry(T0, client="10.0.0.2", token="", role=""), "unauthorized")
    await store.audit_refused(_entry(T0 + REFUSAL_BUCKET_SECONDS), "forbidden")
    rows = await store.audit_rows(AuditFilter(), after_id=None, limit=10)
    assert sorted((r.client, r.outcome, r.attempts) for r in rows) == [
        ("10.0.0.1", "forbidden", 1),
        ("10.0.0.1", "unauthorized", 50),
        ("10.0.0.2", "unauthorized", 1),
    ]


async def test_rows_page_newest_first_and_filter(store: Store) -> None:
    ids = [await store.audit_start(_entry(T0 + i, token=f"t{i % 2}")) for i in range(5)]
    first = await store.audit_rows(AuditFilter(), after_id=None, limit=2)
    assert [r.id for r in first] == ids[::-1][:2]
    rest = await store.audit_rows(AuditFilter(), after_id=first[-1].id, limit=10)
    assert [r.id for r in rest] == ids[::-1][2:]
    only = await store.audit_rows(AuditFilter(token="t1"), after_id=None, limit=10)
    assert [r.id for r in only] == [ids[3], ids[1]]
    timed = AuditFilter(action="replay_job", after=T0 + 1, before=T0 + 3)
    assert [r.id for r in await store.audit_rows(timed, after_id=None, limit=10)] == ids[2:0:-1]


async def test_retention_keeps_the_rows_of_jobs_still_kept(store: Store) -> None:
    event = Event(source="reducto", job_id="kept", state=State.QUEUED, provider_status="x",
                  via="track")  # fmt: skip
    await store.ingest(event, (), resolve=False)
    await store.audit_start(_entry(target="reducto/kept"))
    gone = await store.audit_start(_entry(target="reducto/purged"))
    await store.audit_start(_entry(T0 + 100, target="reducto/recent"))
    assert await store.purge_audit(T0 + 50, 100) == 1
    left = {r.target for r in await store.audit_rows(AuditFilter(), after_id=None, limit=10)}
    assert left == {"reducto/kept", "reducto/recent"}
    assert gone not in {r.id for r in await store.audit_rows(AuditFilter(), after_id=None, limit=9)}


def _track(job_id: str) -> Event:
    return Event(source="reducto", job_id=job_id, state=State.QUEUED, provider_status="tracked",
                 via="track")  # fmt: skip


async def _rows(store: Store) -> list[tuple[str, str, str, int | None]]:
    rows = await store.audit_rows(AuditFilter(), after_id=None, limit=100)
    return sorted((r.action, r.target, r.outcome, r.jobs) for r in rows)


async def _dead(store: Store, job_id: str) -> None:
    """A finished job whose one delivery died."""
    done = Event(source="reducto", job_id=job_id, state=State.SUCCEEDED, provider_status="x",
                 via="webhook", message_id=f"m-{job_id}")  # fmt: skip
    await store.ingest(done, ("files",), resolve=False)
    for dispatch, _ in await store.claim_dispatches("t", 10, 60, time.time() + 1):
        await store.finish_dispatch(dispatch.id, "t", error="gone", next_attempt_at=None)


async def test_a_track_and_a_replay_write_their_finished_row_with_their_effect(
    store: Store,
) -> None:
    tracked = _entry(target="reducto/t1", action="track_job")
    await store.ingest(_track("t1"), (), resolve=True, audit=tracked)
    await _dead(store, "d1")
    replayed = _entry(target="reducto/d1")
    assert await store.replay(source="reducto", job_id="d1", audit=replayed) == 1
    assert await store.get_job("reducto", "t1") is not None
    assert await _rows(store) == [
        ("replay_job", "reducto/d1", "ok", 1),
        ("track_job", "reducto/t1", "ok", 1),
    ]


async def test_no_effect_stands_when_its_row_cannot_be_written(store: Store) -> None:
    await _dead(store, "d1")
    await inject_fault(store, "audit", "INSERT", "NEW.outcome = 'ok'")
    with pytest.raises(StoreUnavailableError):
        await store.ingest(_track("t1"), (), resolve=True, audit=_entry(target="reducto/t1"))
    with pytest.raises(StoreUnavailableError):
        await store.replay(source="reducto", job_id="d1", audit=_entry(target="reducto/d1"))
    assert await store.get_job("reducto", "t1") is None
    assert [d.state for d in await store.dispatches_for("reducto", "d1")] == ["dead"]
    assert await _rows(store) == []
    # Without a row the store stays as it was: the next writes go on as before.
    await store.ingest(_track("t2"), (), resolve=True)
    assert await store.get_job("reducto", "t2") is not None


async def test_a_failed_effect_leaves_no_row_of_its_own_for_the_caller_to_write(
    store: Store,
) -> None:
    await inject_fault(store, "jobs", "INSERT", "NEW.job_id = 'doomed'")
    entry = _entry(target="reducto/doomed", action="track_job")
    with pytest.raises(StoreUnavailableError):
        await store.ingest(_track("doomed"), (), resolve=True, audit=entry)
    assert await _rows(store) == []
    await store.audit_start(dataclasses.replace(entry, outcome="failed"))
    assert await _rows(store) == [("track_job", "reducto/doomed", "failed", None)]
    assert await store.get_job("reducto", "doomed") is None
