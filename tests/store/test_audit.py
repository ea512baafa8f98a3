"""The audit trail on every backend: actions started then finished, refusals counted on one
row per address and reason, pages newest first, and retention that keeps rows of kept jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.models import Event, State
from receiver.store.audit import REFUSAL_BUCKET_SECONDS, AuditEntry, AuditFilter

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
