"""The error breakdown, on every backend: each failure's normalised code, where it arose, the
listing filter on it and the counts ``/jobs/stats`` reports."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from receiver.models import State
from receiver.store import Resolution
from receiver.store.rows import ErrorCount, JobFilter
from tests.store.test_contract import SOURCE, claim_all, complete, news

if TYPE_CHECKING:
    from receiver.store import Store


async def failing_world(store: Store) -> None:
    """job-1 failed with the provider's code, job-2 failed without one, job-3's result was too
    large to fetch, job-4 succeeded but handler ``hook`` answers 503 (retrying) and ``box``
    cannot connect (dead)."""
    await store.ingest(
        news("job-1", State.FAILED, "m1", error_code="DOCUMENT_CORRUPT"), [], resolve=False
    )
    await store.ingest(news("job-2", State.FAILED, "m2", error="it broke"), [], resolve=False)
    await store.ingest(news("job-3", State.SUCCEEDED, "m3"), [], resolve=True)
    (row,) = await store.claim_completions("w1", 10, 30, time.time() + 1)
    resolution = Resolution(
        error="result not fetched: too large", error_code="result_too_large", error_where="fetch"
    )
    await store.resolve_completion(row.id, "w1", resolution)
    await complete(store, "job-4", "hook", "box")
    now = time.time() + 2
    claimed = {(d.handler, d.completion_id): d for d in await claim_all(store, "w1", now)}
    for (handler, _), dispatch in claimed.items():
        if handler == "hook":
            await store.finish_dispatch(
                dispatch.id, "w1", error="POST x answered 503", next_attempt_at=now + 60,
                error_code="http_5xx",
            )  # fmt: skip
        else:
            await store.finish_dispatch(
                dispatch.id, "w1", error="connect failed", next_attempt_at=None,
                error_code="connect_error",
            )  # fmt: skip


async def test_each_failed_job_lists_its_normalised_code_and_where(store: Store) -> None:
    await failing_world(store)
    listed = {
        r.job.job_id: (r.failure_code, r.failure_where, r.failure_message)
        for r in await store.list_jobs(JobFilter(), limit=10)
    }
    assert listed == {
        "job-1": ("DOCUMENT_CORRUPT", "provider", None),
        "job-2": ("provider_failed", "provider", "it broke"),
        "job-3": ("result_too_large", "fetch", "result not fetched: too large"),
        "job-4": (None, None, None),
    }


async def test_a_failed_attempt_keeps_its_code_until_the_dispatch_succeeds(store: Store) -> None:
    await failing_world(store)
    codes = {d.handler: d.error_code for d in await store.dispatches_for(SOURCE, "job-4")}
    assert codes == {"hook": "http_5xx", "box": "connect_error"}
    assert await store.replay(handler="box") == 1
    codes = {d.handler: d.error_code for d in await store.dispatches_for(SOURCE, "job-4")}
    assert codes == {"hook": "http_5xx", "box": None}


async def test_listing_filters_on_the_jobs_code_or_a_dispatchs(store: Store) -> None:
    await failing_world(store)

    async def ids(code: str) -> list[str]:
        rows = await store.list_jobs(JobFilter(error_code=code), limit=10)
        return sorted(r.job.job_id for r in rows)

    assert await ids("DOCUMENT_CORRUPT") == ["job-1"]
    assert await ids("provider_failed") == ["job-2"]
    assert await ids("result_too_large") == ["job-3"]
    assert await ids("http_5xx") == ["job-4"]
    assert await ids("connect_error") == ["job-4"]
    assert await ids("nothing_like_it") == []


async def test_stats_count_errors_by_code_where_source_and_handler(store: Store) -> None:
    await failing_world(store)
    stats = await store.job_stats(0)
    assert sorted(stats.errors, key=lambda e: e.code) == [
        ErrorCount("DOCUMENT_CORRUPT", "provider", SOURCE, None, 1),
        ErrorCount("connect_error", "handler", SOURCE, "box", 1),
        ErrorCount("http_5xx", "handler", SOURCE, "hook", 1),
        ErrorCount("provider_failed", "provider", SOURCE, None, 1),
        ErrorCount("result_too_large", "fetch", SOURCE, None, 1),
    ]
    assert (await store.job_stats(time.time() + 3600)).errors == ()
