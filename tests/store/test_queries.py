"""The admin queries of the SQLite store (receiver.store.queries), on real SQLite files."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from receiver.models import State
from receiver.store import Resolution
from receiver.store.rows import JobFilter
from tests.adminsupport import open_store, record

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.store.sqlite.store import SQLiteStore

T0 = 1_800_000_000.0
FAR = T0 + 10**7  # "now" for claims: everything recorded is due


async def _ids(store: SQLiteStore, where: JobFilter, limit: int = 100) -> list[str]:
    return [row.job.job_id for row in await store.list_jobs(where, limit=limit)]


async def _resolve(store: SQLiteStore, resolution: Resolution) -> None:
    """Resolve every completion waiting for it, as the dispatcher would."""
    for row in await store.claim_completions("test", 100, 60, FAR):
        await store.resolve_completion(row.id, "test", resolution)


async def _deliver_all(store: SQLiteStore, error: str | None = None, final: bool = True) -> None:
    """Run every claimable dispatch once: success, or ``error`` (dead when ``final``)."""
    for dispatch, _ in await store.claim_dispatches("test", 100, 60, FAR):
        later = None if final else time.time() + 3600
        await store.finish_dispatch(dispatch.id, "test", error=error, next_attempt_at=later)


async def test_filters_select_by_source_state_time_and_metadata(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "a", at=T0, customer="acme", n=5)
        await record(store, "b", State.FAILED, at=T0 + 10, customer="zen")
        await record(store, "c", State.RUNNING, at=T0 + 20, customer="acme")
        await record(store, "d", at=T0 + 30, source="other", customer="acme")
        assert await _ids(store, JobFilter()) == ["d", "c", "b", "a"]
        assert await _ids(store, JobFilter(source="reducto")) == ["c", "b", "a"]
        assert await _ids(store, JobFilter(state="failed")) == ["b"]
        assert await _ids(store, JobFilter(created_after=T0 + 10)) == ["d", "c", "b"]
        assert await _ids(store, JobFilter(created_before=T0 + 10)) == ["a"]
        acme = JobFilter(metadata=(("customer", "acme"),))
        assert await _ids(store, acme) == ["d", "c", "a"]
        both = JobFilter(source="reducto", metadata=(("customer", "acme"), ("n", "5")))
        assert await _ids(store, both) == ["a"]
        assert await _ids(store, JobFilter(metadata=(("customer", "nobody"),))) == []


async def test_metadata_keys_match_literally_and_values_as_text(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "a", **{"a.b": "1", 'q"k': "2", "café": "x", "ok": True})
        await record(store, "b", a={"b": "1"}, ok=False)
        assert await _ids(store, JobFilter(metadata=(("a.b", "1"),))) == ["a"]
        assert await _ids(store, JobFilter(metadata=(('q"k', "2"),))) == ["a"]
        assert await _ids(store, JobFilter(metadata=(("café", "x"),))) == ["a"]
        assert await _ids(store, JobFilter(metadata=(("ok", "false"),))) == ["b"]


async def test_keyset_pages_are_stable_when_many_jobs_share_a_timestamp(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        for n in range(7):
            await record(store, f"job-{n}", at=T0)
        await record(store, "later", at=T0 + 1)
        seen: list[str] = []
        after = None
        while True:
            page = await store.list_jobs(JobFilter(), limit=3, after=after)
            seen += [row.job.job_id for row in page]
            if len(page) < 3:
                break
            after = page[-1].key
            # A job arriving mid-way (newer than every cursor) neither repeats nor shifts pages.
            await record(store, f"new-{len(seen)}", at=T0 + 100)
        assert seen == ["later", *[f"job-{n}" for n in reversed(range(7))]]


async def test_min_confidence_uses_the_resolved_job_level_number(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "sure", resolve=True)
        await _resolve(store, Resolution(confidence=0.95))
        await record(store, "unsure", resolve=True)
        await _resolve(store, Resolution(confidence=0.5))
        await record(store, "unknown", resolve=True)
        await _resolve(store, Resolution())
        assert await _ids(store, JobFilter(min_confidence=0.9)) == ["sure"]
        assert await _ids(store, JobFilter(min_confidence=0.5)) == ["unsure", "sure"]
        (listing,) = await store.list_jobs(JobFilter(job_id="sure"), limit=5)
        assert listing.confidence == 0.95


async def test_deliveries_are_listed_oldest_first(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "a", State.RUNNING, at=T0, message_id="m1")
        await record(store, "a", State.SUCCEEDED, at=T0 + 5, message_id="m2")
        rows = await store.deliveries_for("reducto", "a")
        assert [(r.message_id, r.state, r.received_at) for r in rows] == [
            ("m1", "running", T0),
            ("m2", "succeeded", T0 + 5),
        ]


async def test_stats_count_states_sources_durations_and_failures(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        # Ten jobs taking 1..10 s, one failed, one still running, one too old to count.
        for n in range(1, 11):
            await record(store, f"j{n}", State.QUEUED, at=T0, message_id=f"q{n}")
            state = State.FAILED if n == 10 else State.SUCCEEDED
            await record(store, f"j{n}", state, at=T0 + n, message_id=f"t{n}")
        await record(store, "open", State.RUNNING, at=T0)
        await record(store, "old", at=T0 - 90_000, source="other")
        await _deliver_all(store, error="boom")
        stats = await store.job_stats(T0 - 3600)
    assert stats.total == 11
    assert stats.by_state == {"succeeded": 9, "failed": 1, "running": 1}
    assert stats.by_source == {"reducto": 11}
    assert (stats.terminal, stats.succeeded, stats.durations) == (10, 9, 10)
    assert stats.avg_seconds == pytest.approx(5.5)
    assert (stats.p50_seconds, stats.p95_seconds) == (5.0, 10.0)
    assert stats.handler_failures == {"files": {"dead": 10, "retrying": 0}}


async def test_stats_of_an_empty_period_have_no_figures(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        stats = await store.job_stats(T0)
    assert (stats.total, stats.durations, stats.p50_seconds, stats.avg_seconds) == (
        0,
        0,
        None,
        None,
    )


async def test_completions_after_follow_id_order(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        assert await store.last_completion_id() == 0
        for name in ("a", "b", "c"):
            await record(store, name)
        first = await store.completions_after(0, 2)
        rest = await store.completions_after(first[-1].id, 10)
        assert [c.job_id for c in first + rest] == ["a", "b", "c"]
        assert await store.last_completion_id() == rest[-1].id


async def test_backlog_counts_work_not_yet_delivered(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "resolving", at=T0, resolve=True)
        await record(store, "ready", at=T0 + 10, handlers=("files", "other", "third"))
        claimed = {d.handler: d for d, _ in await store.claim_dispatches("t", 10, 60, T0 + 20)}
        await store.finish_dispatch(claimed["files"].id, "t", error=None, next_attempt_at=None)
        await store.finish_dispatch(claimed["other"].id, "t", error="x", next_attempt_at=None)
        backlog = await store.backlog()
    # The resolving completion's dispatch waits as pending; "third" is still running.
    assert (backlog.resolving, backlog.pending, backlog.running, backlog.dead) == (1, 1, 1, 1)
    assert backlog.oldest_pending_at == T0
