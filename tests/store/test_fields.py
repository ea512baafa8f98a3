"""Per-field confidence in every store: written with the resolution, read back, filtered on,
summed up in stats (mean, nearest-rank p10, share below each source's threshold)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.store import Resolution
from receiver.store.rows import FieldValue, JobFilter
from tests.adminsupport import record

if TYPE_CHECKING:
    from receiver.store import Store

T0 = 1_800_000_000.0
FAR = T0 + 10**7


def _fields(**confidence: float | None) -> tuple[FieldValue, ...]:
    return tuple(FieldValue(name, c, f"value of {name}") for name, c in confidence.items())


async def _resolve(store: Store, job_id: str, fields: tuple[FieldValue, ...]) -> None:
    (row,) = [r for r in await store.claim_completions("t", 100, 60, FAR) if r.job_id == job_id]
    low = min((f.confidence for f in fields if f.confidence is not None), default=None)
    await store.resolve_completion(
        row.id, "t", Resolution("/r", "ab" * 32, 10, confidence=low, fields=fields)
    )


async def _ids(store: Store, where: JobFilter) -> list[str]:
    return sorted(row.job.job_id for row in await store.list_jobs(where, limit=100))


async def test_fields_are_kept_with_the_resolution_and_read_back(store: Store) -> None:
    await record(store, "a", at=T0, source="docextract", resolve=True)
    await _resolve(store, "a", _fields(total=0.62, invoice_number=0.98, note=None))
    found = await store.fields_of([("docextract", "a"), ("docextract", "nope")])
    assert found == {
        ("docextract", "a"): [
            FieldValue("invoice_number", 0.98, "value of invoice_number"),
            FieldValue("note", None, "value of note"),
            FieldValue("total", 0.62, "value of total"),
        ]
    }


async def test_a_completion_resolved_under_a_lost_lease_keeps_no_fields(store: Store) -> None:
    await record(store, "a", at=T0, resolve=True)
    (row,) = await store.claim_completions("t", 100, 60, FAR)
    resolution = Resolution("/r", "ab" * 32, 10, fields=_fields(total=0.5))
    await store.resolve_completion(row.id, "someone-else", resolution)
    assert await store.fields_of([("reducto", "a")]) == {}


async def test_field_and_max_confidence_find_the_weak_extractions(store: Store) -> None:
    for n, total in enumerate((0.62, 0.91, 0.80)):
        await record(store, f"job-{n}", at=T0 + n, source="docextract", resolve=True)
        await _resolve(store, f"job-{n}", _fields(total=total, invoice_number=0.98))
    await record(store, "no-fields", at=T0 + 9, source="docextract", resolve=True)
    await _resolve(store, "no-fields", ())
    weak = JobFilter(field="total", max_confidence=0.8)
    assert await _ids(store, weak) == ["job-0", "job-2"]  # at or below
    assert await _ids(store, JobFilter(field="total", max_confidence=0.5)) == []
    assert await _ids(store, JobFilter(field="total")) == ["job-0", "job-1", "job-2"]
    assert await _ids(store, JobFilter(field="absent")) == []
    both = JobFilter(field="total", max_confidence=0.8, created_after=T0 + 1)
    assert await _ids(store, both) == ["job-2"]
    assert await _ids(store, JobFilter(min_confidence=0.9)) == ["job-1"]


async def test_stats_give_count_mean_p10_and_share_below_each_sources_threshold(
    store: Store,
) -> None:
    totals = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, 1.0]
    for n, total in enumerate(totals):
        await record(store, f"d-{n}", at=T0 + n, source="docextract", resolve=True)
        await _resolve(store, f"d-{n}", _fields(total=total))
    await record(store, "r-0", at=T0, source="reducto", resolve=True)
    await _resolve(store, "r-0", _fields(Table=0.5, Text=0.95))
    await record(store, "old", at=T0 - 100, source="reducto", resolve=True)
    await _resolve(store, "old", _fields(Table=0.1))
    await record(store, "k", at=T0, source="kv", resolve=True)
    await _resolve(store, "k", _fields(**{f"x{n}": 0.5 for n in range(3)}))
    stats = await store.field_stats(T0, {"docextract": 0.85}, 0.8)
    by = {(f.source, f.field): f for f in stats.fields}
    total = by["docextract", "total"]
    assert total.count == 11
    assert total.mean == pytest.approx(sum(totals) / 11, abs=1e-9)
    assert total.p10 == 0.6  # nearest rank: ceil(0.1 * 11) = 2nd lowest
    assert (total.below, total.threshold) == (5, 0.85)  # 0.85 itself is not below
    table = by["reducto", "Table"]
    assert (table.count, table.p10, table.below, table.threshold) == (1, 0.5, 1, 0.8)
    assert by["reducto", "Text"].below == 0
    least = [("kv", "x0"), ("kv", "x1"), ("kv", "x2"), ("reducto", "Table")]  # 0.5: by name
    assert [(f.source, f.field) for f in stats.fields[:4]] == least  # least confident first
    expected = (sum(totals) + 0.5 + 0.5) / 13  # each job's own (lowest) confidence
    assert stats.avg_confidence == pytest.approx(expected, abs=1e-9)
    empty = await store.field_stats(FAR, {}, 0.8)
    assert (empty.avg_confidence, empty.fields) == (None, ())


async def test_field_names_are_the_union_over_the_filtered_jobs(store: Store) -> None:
    await record(store, "a", at=T0, source="docextract", resolve=True)
    await _resolve(store, "a", _fields(total=0.9, invoice_number=0.9))
    await record(store, "b", at=T0 + 1, source="docextract", resolve=True)
    await _resolve(store, "b", _fields(vendor=0.9))
    await record(store, "c", at=T0 + 2, source="other", resolve=True)
    await _resolve(store, "c", _fields(zeta=0.9))
    assert await store.field_names(JobFilter(source="docextract"), 10) == [
        "invoice_number",
        "total",
        "vendor",
    ]
    assert await store.field_names(JobFilter(), 2) == ["invoice_number", "total"]
    meta = JobFilter(metadata=(("nobody", "x"),))
    assert await store.field_names(meta, 10) == []


async def test_purging_a_job_takes_its_fields(store: Store) -> None:
    await record(store, "a", at=T0, resolve=True)
    await _resolve(store, "a", _fields(Text=0.95))
    for dispatch, _ in await store.claim_dispatches("t", 10, 60, FAR):
        await store.finish_dispatch(dispatch.id, "t", error=None, next_attempt_at=None)
    purged, _ = await store.purge(FAR * 2, 10)
    assert purged == 1
    assert await store.fields_of([("reducto", "a")]) == {}
    assert (await store.field_stats(0, {}, 0.8)).fields == ()


async def test_p10_is_the_nearest_rank_however_many_values(store: Store) -> None:
    values = [round(0.01 * n, 2) for n in range(1, 31)]  # 30 values: p10 is the 3rd lowest
    for n, value in enumerate(reversed(values)):
        await record(store, f"j{n}", at=T0 + n, source="docextract", resolve=True)
        await _resolve(store, f"j{n}", _fields(total=value, same=0.8))
    stats = await store.field_stats(T0, {}, 0.8)
    by = {f.field: f for f in stats.fields}
    assert (by["total"].count, by["total"].p10) == (30, 0.03)
    assert (by["same"].p10, by["same"].below, by["same"].threshold) == (0.8, 0, 0.8)
