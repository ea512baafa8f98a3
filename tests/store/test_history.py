"""The console's reads on every backend: attempts as they ended, completions over time and dead
deliveries grouped by handler and error code."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from receiver.models import Event, State
from receiver.store.rows import JobFilter
from tests.store.test_contract import SOURCE, claim_all, complete, news

if TYPE_CHECKING:
    from receiver.store import Store


async def test_each_ended_attempt_is_recorded_with_its_outcome(store: Store) -> None:
    await complete(store, "job-1", "a")
    now = time.time() + 1
    (first,) = await claim_all(store, "w1", now)
    await store.finish_dispatch(
        first.id, "w1", error="503 from x", next_attempt_at=now + 5, error_code="http_5xx"
    )
    (second,) = await claim_all(store, "w1", now + 6)
    await store.finish_dispatch(second.id, "w1", error="gone", next_attempt_at=None)
    await store.replay(source=SOURCE, job_id="job-1")
    (third,) = await claim_all(store, "w1", now + 7)
    await store.finish_dispatch(third.id, "w1", error=None, next_attempt_at=None)
    attempts = await store.attempts_for(SOURCE, "job-1")
    assert [(a.handler, a.attempt, a.outcome) for a in attempts] == [
        ("a", 1, "retry"),
        ("a", 2, "dead"),
        ("a", 1, "succeeded"),  # a replay starts the count again
    ]
    assert (attempts[0].error, attempts[0].error_code) == ("503 from x", "http_5xx")
    assert attempts[0].next_attempt_at == now + 5
    assert attempts[2].error is None
    assert await store.attempts_for(SOURCE, "job-2") == []


async def test_a_finish_without_the_lease_records_no_attempt(store: Store) -> None:
    await complete(store, "job-1", "a")
    (claimed,) = await claim_all(store, "w1", time.time() + 1)
    await store.finish_dispatch(claimed.id, "someone-else", error=None, next_attempt_at=None)
    assert await store.attempts_for(SOURCE, "job-1") == []


async def test_dead_deliveries_are_grouped_and_listed_by_handler_and_code(store: Store) -> None:
    for job in ("job-1", "job-2", "job-3"):
        await complete(store, job, "a", "b")
    now = time.time() + 1
    for d in await claim_all(store, "w1", now):
        code = "http_5xx" if d.handler == "a" else None
        await store.finish_dispatch(d.id, "w1", error="x", next_attempt_at=None, error_code=code)
    groups = await store.dead_groups()
    assert {(g.handler, g.error_code, g.count) for g in groups} == {
        ("a", "http_5xx", 3),
        ("b", "unknown", 3),
    }
    rows = await store.dead_list("a", None, 10)
    assert {(r.source, r.job_id, r.handler) for r in rows} == {
        (SOURCE, j, "a") for j in ("job-1", "job-2", "job-3")
    }
    assert len(await store.dead_list(None, "unknown", 2)) == 2
    assert await store.dead_list("a", "unknown", 10) == []


async def test_completions_over_time_count_terminal_jobs_per_bucket(store: Store) -> None:
    for job in ("job-1", "job-2"):
        await complete(store, job, "a")
    buckets = await store.completed_over_time(time.time() - 3600, 3600.0)
    assert sum(b.completed for b in buckets) == 2
    assert all(b.start % 3600 == 0 for b in buckets)
    assert await store.completed_over_time(time.time() + 3600, 3600.0) == []


async def test_outcomes_over_time_count_per_bucket_with_nearest_rank_percentiles(
    store: Store,
) -> None:
    for n in range(20):
        await store.ingest(news(f"j{n}", State.QUEUED, f"q{n}"), [])
    for n in range(20):
        state = State.FAILED if n < 2 else State.SUCCEEDED
        await store.ingest(news(f"j{n}", state, f"t{n}"), [])
    rows = [await store.get_job(SOURCE, f"j{n}") for n in range(20)]
    took = sorted(r.terminal_at - r.created_at for r in rows if r and r.terminal_at)
    year = 3600.0 * 24 * 365
    (bucket,) = await store.outcomes_over_time(time.time() - 3600, year)
    assert (bucket.completed, bucket.succeeded, bucket.failed) == (20, 18, 2)
    # Nearest rank among 20: ceil(0.5 x 20) = 10th, ceil(0.95 x 20) = 19th.
    assert bucket.p50_seconds == pytest.approx(took[9])
    assert bucket.p95_seconds == pytest.approx(took[18])
    assert bucket.start % year == 0
    assert await store.outcomes_over_time(time.time() + 3600, 3600.0) == []


async def test_errors_over_time_count_failed_jobs_and_failed_attempts_by_code(
    store: Store,
) -> None:
    await store.ingest(
        news("bad", State.FAILED, "b1", error="no text", error_code="extraction_failed"), []
    )
    await complete(store, "job-1", "a")
    now = time.time() + 1
    (first,) = await claim_all(store, "w1", now)
    await store.finish_dispatch(
        first.id, "w1", error="503", next_attempt_at=now + 1, error_code="http_5xx"
    )
    (second,) = await claim_all(store, "w1", now + 2)
    await store.finish_dispatch(second.id, "w1", error=None, next_attempt_at=None)
    found = await store.errors_over_time(time.time() - 3600, 3600.0 * 24 * 365)
    assert {(e.code, e.count) for e in found} == {("extraction_failed", 1), ("http_5xx", 1)}
    assert await store.errors_over_time(time.time() + 3600, 3600.0) == []


async def test_jobs_are_listed_oldest_first_on_request_and_paged_forward(store: Store) -> None:
    for n in range(5):
        await store.ingest(
            Event(source=SOURCE, job_id=f"job-{n}", state=State.QUEUED, provider_status="Pending",
                  via="webhook", message_id=f"m{n}"),
            [],
        )  # fmt: skip
    oldest = JobFilter(oldest_first=True)
    first = await store.list_jobs(oldest, limit=3)
    rest = await store.list_jobs(oldest, limit=3, after=first[-1].key)
    assert [r.job.job_id for r in [*first, *rest]] == [f"job-{n}" for n in range(5)]
    newest = await store.list_jobs(JobFilter(), limit=5)
    assert [r.job.job_id for r in newest] == [f"job-{n}" for n in reversed(range(5))]
