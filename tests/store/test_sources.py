"""A token limited to some sources reads only their jobs, on every backend: listings and their
pages, field names, stats, field stats, the event stream, the console's charts, dead letters and
what a bulk replay selects. The limit is a parameter of each read, never a filter after it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from receiver.models import Event, State
from receiver.store import Resolution
from receiver.store.bulk import ReplayFilter
from receiver.store.rows import FieldValue, JobFilter

if TYPE_CHECKING:
    from receiver.store import Store

# Three sources: "a" has two jobs (one failed), "b" one, "c" one that is still running.
JOBS = (("a", "a1", State.SUCCEEDED), ("a", "a2", State.FAILED), ("b", "b1", State.SUCCEEDED),
        ("c", "c1", State.RUNNING))  # fmt: skip
YEAR = 3600.0 * 24 * 365


async def _filled(store: Store) -> float:
    """The jobs above, resolved with one field each, every delivery dead; when they started."""
    started = time.time() - 60
    for source, job_id, state in JOBS:
        event = Event(source=source, job_id=job_id, state=state, provider_status=state.value,
                      via="webhook", message_id=f"m-{job_id}",
                      error_code="bad_scan" if state is State.FAILED else None)  # fmt: skip
        await store.ingest(event, ("files",), resolve=True)
    now = time.time() + 1
    for row in await store.claim_completions("t", 100, 60, now):
        confidence = 0.5 if row.source == "a" else 0.9
        fields = (FieldValue(f"total_{row.source}", confidence, "1"),)
        await store.resolve_completion(
            row.id, "t", Resolution("/r", "ab" * 32, 1, confidence=confidence, fields=fields)
        )
    for dispatch, _ in await store.claim_dispatches("t", 100, 60, now):
        await store.finish_dispatch(
            dispatch.id, "t", error="refused", next_attempt_at=None, error_code="http_4xx"
        )
    return started


async def _listed(store: Store, where: JobFilter) -> list[str]:
    return sorted(row.job.job_id for row in await store.list_jobs(where, limit=100))


async def test_listings_and_their_pages_hold_only_the_tokens_sources(store: Store) -> None:
    await _filled(store)
    assert await _listed(store, JobFilter(sources=("a", "c"))) == ["a1", "a2", "c1"]
    assert await _listed(store, JobFilter(sources=("b",))) == ["b1"]
    # Naming another source does not widen the limit: it narrows to nothing.
    assert await _listed(store, JobFilter(source="b", sources=("a",))) == []
    assert await _listed(store, JobFilter(source="b", job_id="b1", sources=("a",))) == []
    assert await _listed(store, JobFilter(sources=())) == []
    first = await store.list_jobs(JobFilter(sources=("a", "c")), limit=2)
    rest = await store.list_jobs(JobFilter(sources=("a", "c")), limit=2, after=first[-1].key)
    assert sorted(r.job.job_id for r in first + rest) == ["a1", "a2", "c1"]
    names = await store.field_names(JobFilter(sources=("b",)), 10)
    assert names == ["total_b"]


async def test_stats_count_only_the_tokens_sources(store: Store) -> None:
    since = await _filled(store)
    every = await store.job_stats(since)
    assert every.by_source == {"a": 2, "b": 1, "c": 1}
    stats = await store.job_stats(since, sources=("a",))
    assert (stats.total, stats.by_source, stats.terminal, stats.succeeded) == (2, {"a": 2}, 2, 1)
    assert stats.by_state == {"succeeded": 1, "failed": 1}
    assert stats.durations == 2
    assert stats.handler_failures == {"files": {"dead": 2, "retrying": 0}}
    assert {e.source for e in stats.errors} == {"a"}
    assert sum(e.count for e in stats.errors if e.where == "handler") == 2
    none = await store.job_stats(since, sources=("c",))
    assert (none.total, none.terminal, none.handler_failures, none.errors) == (1, 0, {}, ())
    fields = await store.field_stats(since, {}, 0.8, sources=("b",))
    assert [(f.source, f.field) for f in fields.fields] == [("b", "total_b")]
    assert fields.avg_confidence == 0.9
    assert (await store.field_stats(since, {}, 0.8, sources=("c",))).avg_confidence is None


async def test_the_event_stream_and_the_charts_show_only_the_tokens_sources(
    store: Store,
) -> None:
    since = await _filled(store)
    every = await store.completions_after(0, 100)
    assert sorted(c.job_id for c in every) == ["a1", "a2", "b1"]
    only_b = await store.completions_after(0, 100, sources=("b",))
    assert [c.job_id for c in only_b] == ["b1"]
    first = await store.completions_after(0, 1, sources=("a",))
    rest = await store.completions_after(first[-1].id, 100, sources=("a",))
    assert [c.job_id for c in first + rest] == ["a1", "a2"]
    (bucket,) = await store.outcomes_over_time(since, YEAR, sources=("a",))
    assert (bucket.completed, bucket.succeeded, bucket.failed) == (2, 1, 1)
    assert await store.outcomes_over_time(since, YEAR, sources=("c",)) == []
    errors = await store.errors_over_time(since, YEAR, sources=("b",))
    assert {(e.code, e.count) for e in errors} == {("http_4xx", 1)}
    every_error = await store.errors_over_time(since, YEAR)
    assert {(e.code, e.count) for e in every_error} == {("bad_scan", 1), ("http_4xx", 3)}


async def test_dead_letters_and_bulk_replays_reach_only_the_tokens_sources(store: Store) -> None:
    await _filled(store)
    assert [(g.handler, g.count) for g in await store.dead_groups()] == [("files", 3)]
    assert [(g.handler, g.count) for g in await store.dead_groups(sources=("a",))] == [("files", 2)]
    assert await store.dead_groups(sources=("c",)) == []
    dead = await store.dead_list(None, None, 10, sources=("b",))
    assert [(r.source, r.job_id) for r in dead] == [("b", "b1")]
    assert await store.dead_list("files", "http_4xx", 10, sources=("c",)) == []
    limited = ReplayFilter(JobFilter(sources=("a",)))
    assert await store.count_replayable(limited) == 2
    assert await store.count_replayable(ReplayFilter(JobFilter(source="b", sources=("a",)))) == 0
    requeued, _ = await store.replay_chunk(limited, 0, 100, time.time())
    assert requeued == 2
    assert {(r.source, r.job_id) for r in await store.dead_list(None, None, 10)} == {("b", "b1")}
