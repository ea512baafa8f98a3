"""The Store contract, checked on every backend: SQLite and PostgreSQL must behave alike."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from receiver.errors import StoreUnavailableError
from receiver.models import Event, Progress, ResultRef, State
from receiver.store import Resolution
from receiver.store.rows import JobFilter
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from receiver.store import DispatchRow, Store

SOURCE = "acme-docs"
WORDS = {
    State.QUEUED: "Pending",
    State.RUNNING: "InProgress",
    State.SUCCEEDED: "Completed",
    State.FAILED: "Failed",
}


def news(
    job_id: str = "job-1", state: State = State.SUCCEEDED, msg: str | None = "m-1", **kw: Any
) -> Event:
    return Event(source=kw.pop("source", SOURCE), job_id=job_id, state=state,
                 provider_status=WORDS[state], via="webhook", message_id=msg, **kw)  # fmt: skip


async def complete(
    store: Store, job_id: str = "job-1", *handlers: str, resolve: bool = False
) -> None:
    """A job becomes terminal; its dispatches are claimable at once unless ``resolve``."""
    result = await store.ingest(
        news(job_id, msg=f"m-{job_id}"), handlers or ("files",), resolve=resolve
    )
    assert result.completed


async def states(store: Store, job_id: str = "job-1") -> dict[str, str]:
    return {d.handler: d.state for d in await store.dispatches_for(SOURCE, job_id)}


async def claim_all(store: Store, owner: str, at: float, lease: float = 30) -> list[DispatchRow]:
    return [d for d, _ in await store.claim_dispatches(owner, 100, lease, at)]


class TestStoreContract:
    async def test_confirmations_due_counts_completions_waiting_for_their_result_by_source(
        self, store: Store
    ) -> None:
        await complete(store, "job-1", resolve=True)
        await complete(store, "job-2", resolve=True)
        await complete(store, "job-3")  # needs no confirmation
        assert await store.confirmations_due() == {SOURCE: 2}

    async def test_durability_is_nothing_to_add_or_names_its_mode(self, store: Store) -> None:
        found = await store.durability()
        modes = {"synchronous", "asynchronous", "single", "unknown"}
        assert found is None or found["mode"] in modes

    async def test_a_new_message_is_accepted_and_a_repeat_is_a_duplicate(
        self, store: Store
    ) -> None:
        first = await store.ingest(news(), ["files"])
        again = await store.ingest(news(), ["files"])
        assert (first.status, first.completed, first.state) == ("accepted", True, State.SUCCEEDED)
        assert (again.status, again.completed, again.requeued) == ("duplicate", False, 0)
        assert [d.message_id for d in await store.deliveries_for(SOURCE, "job-1")] == ["m-1"]

    async def test_a_message_id_reused_for_another_job_is_a_duplicate_and_makes_no_job(
        self, store: Store
    ) -> None:
        """The dedupe key is the message id: a provider that reuses one for another job gets a
        duplicate, and that job is not created (SQLite inserts it to learn its id, then takes it
        back; PostgreSQL draws an id it never uses)."""
        await store.ingest(news("job-1", msg="m-1"), ["files"])
        reused = await store.ingest(news("job-2", msg="m-1"), ["files"])
        assert (reused.status, reused.completed) == ("duplicate", False)
        assert await store.get_job(SOURCE, "job-2") is None
        assert [j.job.job_id for j in await store.list_jobs(JobFilter(), limit=10)] == ["job-1"]
        later = await store.ingest(news("job-2", msg="m-2"), ["files"])
        assert (later.status, later.completed) == ("accepted", True)
        assert [d.message_id for d in await store.deliveries_for(SOURCE, "job-2")] == ["m-2"]
        assert [d.message_id for d in await store.deliveries_for(SOURCE, "job-1")] == ["m-1"]

    async def test_the_completing_answer_says_how_long_the_job_took(self, store: Store) -> None:
        """What the job metrics observe, so a webhook's count needs no second read."""
        running = await store.ingest(news(state=State.RUNNING, msg="m0"), [])
        time.sleep(0.02)
        done = await store.ingest(news(msg="m1"), [])
        again = await store.ingest(news(msg="m1"), [])
        late = await store.ingest(news(state=State.FAILED, msg="m2"), [])
        fresh = await store.ingest(news("job-2", msg="m3"), [])
        job = await store.get_job(SOURCE, "job-1")
        assert job is not None
        assert job.terminal_at is not None
        assert (running.took, again.took, late.took) == (None, None, None)
        assert done.took == job.terminal_at - job.created_at
        assert done.took >= 0.02
        assert fresh.took == 0.0  # first news of it was its end

    async def test_a_job_state_only_moves_forward(self, store: Store) -> None:
        steps = [State.QUEUED, State.RUNNING, State.QUEUED, State.SUCCEEDED, State.RUNNING]
        answers = []
        for n, state in enumerate(steps):
            result = await store.ingest(news(state=state, msg=f"m{n}"), [])
            answers.append((result.state, result.completed))
        # Each answer carries the job's state after the news, not the news' own state.
        assert answers == [
            (State.QUEUED, False), (State.RUNNING, False), (State.RUNNING, False),
            (State.SUCCEEDED, True), (State.SUCCEEDED, False),
        ]  # fmt: skip
        job = await store.get_job(SOURCE, "job-1")
        assert job is not None
        assert (job.state, job.provider_status) == ("succeeded", "Completed")
        assert job.terminal_at is not None

    async def test_metadata_news_is_merged_into_the_job(self, store: Store) -> None:
        first = {"customer": "acme", "nested": {"x": 1}, "gone": True}
        await store.ingest(news(state=State.RUNNING, msg="m1", metadata=first), [])
        later = {"nested": {"y": 2}, "gone": None}
        await store.ingest(news(state=State.RUNNING, msg="m2", metadata=later), [])
        job = await store.get_job(SOURCE, "job-1")
        assert job is not None
        assert job.metadata == {"customer": "acme", "nested": {"x": 1, "y": 2}}

    async def test_nul_characters_are_accepted_not_refused(self, store: Store) -> None:
        # JSON allows "\u0000"; PostgreSQL's text and jsonb do not: there it becomes U+FFFD.
        nul = "\x00" if isinstance(store, SQLiteStore) else "\ufffd"
        metadata = {"note": "a\x00b", "k\x00ey": ["\x00"], "escaped": "\\u0000"}
        result = await store.ingest(news(metadata=metadata, error="bad\x00byte"), ["files"])
        assert result.status == "accepted"
        job = await store.get_job(SOURCE, "job-1")
        assert job is not None
        assert job.metadata == {"note": f"a{nul}b", f"k{nul}ey": [nul], "escaped": "\\u0000"}
        assert job.error == f"bad{nul}byte"

    async def test_job_fields_read_back_as_written(self, store: Store) -> None:
        assert await store.get_job(SOURCE, "job-1") is None
        event = news(
            state=State.FAILED, error="no pages", progress=Progress(3, 9), expected_pages=9
        )
        await store.ingest(event, [])
        job = await store.get_job(SOURCE, "job-1")
        assert job is not None
        assert (job.state, job.error, job.progress_done, job.progress_total) == (
            "failed",
            "no pages",
            3,
            9,
        )
        assert (job.expected_pages, job.metadata, job.poll_attempts) == (9, {}, 0)
        assert isinstance(job.created_at, float)

    async def test_one_completion_for_a_job_reported_under_two_message_ids(
        self, store: Store
    ) -> None:
        first = await store.ingest(news(msg="m-a"), ["files", "hook"])
        second = await store.ingest(news(msg="m-b"), ["files", "hook"])
        assert (first.status, first.completed) == ("accepted", True)
        assert (second.status, second.completed) == ("accepted", False)
        assert len(await store.completions_after(0, 10)) == 1
        assert await states(store) == {"files": "pending", "hook": "pending"}

    async def test_a_completion_keeps_the_news_it_was_made_from(self, store: Store) -> None:
        # A job first heard of in its terminal news, and a job that was running before.
        ref = ResultRef(url="https://results.example/a.json", sha256="ab" * 32)
        done = news("job-new", msg="m-new", metadata={"k": "v"}, error=None, result=ref)
        await store.ingest(news("job-old", state=State.RUNNING, msg="m-0", metadata={"a": 1}), [])
        old = news("job-old", msg="m-1", metadata={"b": 2}, result=ResultRef(inline={"x": 1}))
        for event, resolve in ((done, True), (old, False)):
            assert (await store.ingest(event, ["files"], resolve=resolve)).completed
        new_row = await store.completion_for(SOURCE, "job-new")
        old_row = await store.completion_for(SOURCE, "job-old")
        assert new_row is not None
        assert old_row is not None
        assert (new_row.state, new_row.provider_status, new_row.phase) == (
            "succeeded",
            "Completed",
            "resolving",
        )
        assert (new_row.metadata, old_row.metadata) == ({"k": "v"}, {"a": 1, "b": 2})
        assert old_row.phase == "ready"
        assert new_row.result_ref is not None
        assert old_row.result_ref is not None
        assert json.loads(new_row.result_ref) == {
            "inline": None,
            "url": ref.url,
            "sha256": ref.sha256,
        }
        assert json.loads(old_row.result_ref) == {"inline": {"x": 1}, "url": None, "sha256": None}

    async def test_only_terminal_news_creates_a_completion_with_one_dispatch_per_handler(
        self, store: Store
    ) -> None:
        await store.ingest(news(state=State.RUNNING, msg="m0"), ["files", "hook", "queue"])
        assert await store.completion_for(SOURCE, "job-1") is None
        await complete(store, "job-1", "files", "hook", "queue")
        rows = await store.dispatches_for(SOURCE, "job-1")
        assert [(d.handler, d.state, d.attempts) for d in rows] == [
            ("files", "pending", 0), ("hook", "pending", 0), ("queue", "pending", 0)
        ]  # fmt: skip

    async def test_a_single_use_result_keeps_its_flag_and_its_fetch_starts_once(
        self, store: Store
    ) -> None:
        ref = ResultRef(url="https://results.example/v1/result/t-1", single_use=True)
        await store.ingest(news(result=ref), ["files"])
        row = await store.completion_for(SOURCE, "job-1")
        assert row is not None
        assert row.result_ref is not None
        assert json.loads(row.result_ref)["single_use"] is True
        now = time.time()
        assert await store.start_result_fetch(row.id, now) is True
        assert await store.start_result_fetch(row.id, now + 1) is False  # never a second time
        await store.ingest(news("job-2", msg="m-2"), ["files"])
        other = await store.completion_for(SOURCE, "job-2")
        assert other is not None
        assert await store.start_result_fetch(other.id, now) is True  # one record per completion

    async def test_dispatches_wait_until_their_completion_is_resolved(self, store: Store) -> None:
        await complete(store, resolve=True)
        now = time.time() + 1
        assert await store.claim_dispatches("w1", 10, 30, now) == []
        (row,) = await store.claim_completions("w1", 10, 30, now)
        assert (row.phase, row.attempts, row.job_id) == ("resolving", 1, "job-1")
        assert await store.claim_completions("w2", 10, 30, now) == []
        resolution = Resolution(result_path="/r/job-1", result_sha256="ab", result_bytes=3)
        await store.resolve_completion(row.id, "w1", resolution)
        ((dispatch, completion),) = await store.claim_dispatches("w1", 10, 30, now)
        assert (completion.phase, completion.result_path, completion.result_bytes) == (
            "ready", "/r/job-1", 3
        )  # fmt: skip
        assert dispatch.completion_id == completion.id

    async def test_a_completion_that_needs_no_resolving_is_claimable_at_once(
        self, store: Store
    ) -> None:
        await complete(store, resolve=False)
        now = time.time() + 1
        assert await store.claim_completions("w1", 10, 30, now) == []
        assert [d.handler for d in await claim_all(store, "w1", now)] == ["files"]

    async def test_a_claimed_dispatch_is_claimable_again_only_after_its_lease_expires(
        self, store: Store
    ) -> None:
        await complete(store)
        now = time.time() + 1
        (first,) = await claim_all(store, "w1", now, lease=30)
        assert await claim_all(store, "w2", now + 29) == []
        (second,) = await claim_all(store, "w2", now + 31)
        assert (second.id, second.attempts) == (first.id, 2)
        # The first worker lost its lease: its late outcome changes nothing.
        await store.finish_dispatch(first.id, "w1", error=None, next_attempt_at=None)
        assert await states(store) == {"files": "running"}
        await store.finish_dispatch(second.id, "w2", error=None, next_attempt_at=None)
        assert await states(store) == {"files": "succeeded"}

    async def test_a_claimed_completion_is_claimable_again_only_after_its_lease_expires(
        self, store: Store
    ) -> None:
        await complete(store, resolve=True)
        now = time.time() + 1
        (first,) = await store.claim_completions("w1", 10, 30, now)
        assert await store.claim_completions("w2", 10, 30, now + 29) == []
        (second,) = await store.claim_completions("w2", 10, 30, now + 31)
        assert (second.id, second.attempts) == (first.id, 2)
        assert not await store.resolve_completion(first.id, "w1", Resolution(result_path="/stale"))
        row = await store.completion_for(SOURCE, "job-1")
        assert row is not None
        assert (row.phase, row.result_path) == ("resolving", None)
        # The lease's holder stores it, and is told so (it counts the job's outcome then).
        assert await store.resolve_completion(second.id, "w2", Resolution(result_path="/fresh"))

    async def test_finish_records_success_retry_and_dead(self, store: Store) -> None:
        await complete(store, "job-1", "a", "b", "c")
        now = time.time() + 1
        claimed = {d.handler: d for d in await claim_all(store, "w1", now)}
        await store.finish_dispatch(claimed["a"].id, "w1", error=None, next_attempt_at=None)
        await store.finish_dispatch(claimed["b"].id, "w1", error="boom", next_attempt_at=now + 100)
        await store.finish_dispatch(claimed["c"].id, "w1", error="gone", next_attempt_at=None)
        rows = {d.handler: d for d in await store.dispatches_for(SOURCE, "job-1")}
        assert {h: d.state for h, d in rows.items()} == {
            "a": "succeeded",
            "b": "pending",
            "c": "dead",
        }
        assert (rows["b"].last_error, rows["b"].next_attempt_at) == ("boom", now + 100)
        assert await claim_all(store, "w2", now + 99) == []
        assert [d.handler for d in await claim_all(store, "w2", now + 101)] == ["b"]

    async def test_a_retried_completion_is_resolved_again_when_due(self, store: Store) -> None:
        await complete(store, resolve=True)
        now = time.time() + 1
        (row,) = await store.claim_completions("w1", 10, 30, now)
        await store.retry_completion(row.id, "w1", "provider down", now + 100)
        assert await store.claim_completions("w2", 10, 30, now + 99) == []
        (again,) = await store.claim_completions("w2", 10, 30, now + 101)
        assert again.attempts == 2

    async def test_replay_requeues_dead_dispatches_and_on_request_succeeded_ones(
        self, store: Store
    ) -> None:
        await complete(store, "job-1", "a", "c")
        now = time.time() + 1
        claimed = {d.handler: d for d in await claim_all(store, "w1", now)}
        await store.finish_dispatch(claimed["a"].id, "w1", error=None, next_attempt_at=None)
        await store.finish_dispatch(claimed["c"].id, "w1", error="gone", next_attempt_at=None)
        assert await store.replay(handler="a") == 0
        assert await store.replay(job_id="other") == 0
        assert await store.replay(source=SOURCE, job_id="job-1") == 1
        assert await states(store) == {"a": "succeeded", "c": "pending"}
        assert await store.replay(include_succeeded=True) == 1
        rows = await store.dispatches_for(SOURCE, "job-1")
        assert [(d.state, d.attempts, d.last_error) for d in rows] == [("pending", 0, None)] * 2

    async def test_release_gives_claimed_work_back_at_once(self, store: Store) -> None:
        await complete(store, "job-1", resolve=False)
        await complete(store, "job-2", resolve=True)
        now = time.time() + 1
        assert len(await claim_all(store, "w1", now, lease=600)) == 1
        assert len(await store.claim_completions("w1", 10, 600, now)) == 1
        assert await store.release("w2") == 0
        assert await store.release("w1") == 2
        assert await states(store, "job-1") == {"files": "pending"}
        (dispatch,) = await claim_all(store, "w2", now)
        (completion,) = await store.claim_completions("w2", 10, 30, now)
        assert (dispatch.attempts, completion.attempts) == (1, 1)

    async def test_renew_extends_every_lease_its_owner_holds(self, store: Store) -> None:
        await complete(store, "job-1")
        await complete(store, "job-2", resolve=True)
        now = time.time() + 1
        assert len(await claim_all(store, "w1", now, lease=10)) == 1
        assert len(await store.claim_completions("w1", 10, 10, now)) == 1
        await store.renew("w1", now + 100)
        assert await claim_all(store, "w2", now + 50) == []
        assert await store.claim_completions("w2", 10, 30, now + 50) == []
        assert len(await claim_all(store, "w2", now + 101)) == 1
        assert len(await store.claim_completions("w2", 10, 30, now + 101)) == 1

    async def test_a_resend_of_the_message_requeues_the_jobs_dead_dispatches(
        self, store: Store
    ) -> None:
        await complete(store, "job-1", "a", "b")
        now = time.time() + 1
        claimed = {d.handler: d for d in await claim_all(store, "w1", now)}
        await store.finish_dispatch(claimed["a"].id, "w1", error=None, next_attempt_at=None)
        await store.finish_dispatch(claimed["b"].id, "w1", error="gone", next_attempt_at=None)
        resend = await store.ingest(news("job-1", msg="m-job-1"), ["a", "b"])
        assert (resend.status, resend.requeued) == ("duplicate", 1)
        assert await states(store) == {"a": "succeeded", "b": "pending"}

    async def test_next_due_is_the_earliest_pending_work(self, store: Store) -> None:
        assert await store.next_due() is None
        await complete(store)
        now = time.time() + 1
        due = await store.next_due()
        assert due is not None
        assert due <= now
        (claimed,) = await claim_all(store, "w1", now, lease=30)
        assert await store.next_due() == pytest.approx(now + 30)
        await store.finish_dispatch(claimed.id, "w1", error="boom", next_attempt_at=now + 100)
        assert await store.next_due() == pytest.approx(now + 100)

    async def test_a_busy_handlers_dispatches_stay_pending_and_unspent(self, store: Store) -> None:
        """A handler at its concurrency limit: its work is not claimed, so no lease runs out
        and no attempt is spent; claimed as soon as it is no longer busy."""
        await complete(store, "job-1", "hung", "ok")
        await complete(store, "job-2", "hung", "ok")
        now = time.time() + 1
        claimed = await store.claim_dispatches("w1", 10, 30, now, busy=["hung"])
        assert sorted((d.handler, d.attempts) for d, _ in claimed) == [("ok", 1), ("ok", 1)]
        assert [d.handler for d, _ in await store.claim_dispatches("w1", 10, 30, now, ["x"])] == [
            "hung", "hung"
        ]  # fmt: skip

    async def test_next_due_leaves_out_busy_handlers(self, store: Store) -> None:
        await complete(store, "job-1", "hung")
        now = time.time() + 1
        assert await store.next_due(["hung"]) is None
        due = await store.next_due(["other"])
        assert due is not None
        assert due <= now

    async def test_polls_fall_due_at_their_scheduled_time(self, store: Store) -> None:
        t = time.time() + 100
        await store.ingest(news("job-1", State.RUNNING, "m1", poll_at=t), [])
        await store.ingest(news("job-2", State.RUNNING, "m2", poll_at=t + 50), [])
        await store.ingest(news("job-3", State.RUNNING, "m3", poll_at=t, source="other"), [])
        assert await store.due_polls(SOURCE, t - 1, 10) == []
        assert [j.job_id for j in await store.due_polls(SOURCE, t, 10)] == ["job-1"]
        assert await store.next_poll_at() == pytest.approx(t)
        await store.schedule_poll(SOURCE, "job-1", t + 200, 3)
        await store.ingest(news("job-3", State.SUCCEEDED, "m4", source="other"), [])
        assert [j.job_id for j in await store.due_polls(SOURCE, t + 60, 10)] == ["job-2"]
        await store.ingest(news("job-2", State.SUCCEEDED, "m5"), [])
        assert await store.due_polls(SOURCE, t + 60, 10) == []
        (job,) = await store.due_polls(SOURCE, t + 200, 10)
        assert (job.job_id, job.poll_attempts) == ("job-1", 3)
        assert await store.next_poll_at() == pytest.approx(t + 200)

    async def test_a_named_lease_has_one_holder_until_it_expires(self, store: Store) -> None:
        now = time.time()
        assert await store.acquire_lease("poller", "a", 30, now)
        assert not await store.acquire_lease("poller", "b", 30, now + 10)
        assert await store.acquire_lease("poller", "a", 30, now + 20)  # renewed until now + 50
        assert not await store.acquire_lease("poller", "b", 30, now + 40)
        assert await store.acquire_lease("other", "b", 30, now + 40)
        assert await store.acquire_lease("poller", "b", 30, now + 51)
        assert not await store.acquire_lease("poller", "a", 30, now + 52)

    async def test_error_codes_are_kept_from_news_and_from_the_resolution(
        self, store: Store
    ) -> None:
        # A new job's first news (its own insert path), then a known job's (the upsert).
        await store.ingest(news("job-1", State.FAILED, "m1", error_code="TIMEOUT"), ["files"])
        await store.ingest(news("job-2", State.QUEUED, "m2"), ["files"])
        await store.ingest(news("job-2", State.FAILED, "m3", error_code="PARSE_ERROR"), [])
        # A webhook without a code (some send none): the confirming job API call brings it.
        await store.ingest(news("job-3", State.FAILED, "m4"), ["files"], resolve=True)
        claimed = await store.claim_completions("w1", 10, 30, time.time() + 1)
        (row,) = [c for c in claimed if c.job_id == "job-3"]
        resolution = Resolution(error="corrupt", error_code="DOCUMENT_CORRUPT")
        await store.resolve_completion(row.id, "w1", resolution)
        listed = {r.job.job_id: r.error_code for r in await store.list_jobs(JobFilter(), limit=10)}
        assert listed == {"job-1": "TIMEOUT", "job-2": "PARSE_ERROR", "job-3": "DOCUMENT_CORRUPT"}

    async def test_admin_listing_filters_metadata_as_text_and_pages_by_key(
        self, store: Store
    ) -> None:
        for n in range(5):
            metadata = {"customer": "acme" if n % 2 else "zen", "n": n, "urgent": n == 3}
            await store.ingest(news(f"job-{n}", msg=f"m{n}", metadata=metadata), [])
        acme = JobFilter(metadata=(("customer", "acme"),))
        assert {r.job.job_id for r in await store.list_jobs(acme, limit=10)} == {"job-1", "job-3"}
        urgent = JobFilter(metadata=(("urgent", "true"), ("n", "3")))
        assert [r.job.job_id for r in await store.list_jobs(urgent, limit=10)] == ["job-3"]
        first = await store.list_jobs(JobFilter(), limit=3)
        rest = await store.list_jobs(JobFilter(), limit=3, after=first[-1].key)
        assert len(first) == 3
        assert len(rest) == 2
        assert {r.job.job_id for r in [*first, *rest]} == {f"job-{n}" for n in range(5)}

    async def test_backlog_and_stats_count_work_by_state(self, store: Store) -> None:
        await complete(store, "job-1", "a", "b")
        await complete(store, "job-2", resolve=True)
        await store.ingest(news("job-3", State.RUNNING, "m3"), [])
        now = time.time() + 1
        claimed = {d.handler: d for d in await claim_all(store, "w1", now)}
        await store.finish_dispatch(claimed["b"].id, "w1", error="gone", next_attempt_at=None)
        backlog = await store.backlog()
        assert (backlog.resolving, backlog.pending, backlog.running, backlog.dead) == (1, 1, 1, 1)
        stats = await store.job_stats(0)
        assert (stats.total, stats.terminal, stats.by_state) == (
            3,
            2,
            {"succeeded": 2, "running": 1},
        )
        assert stats.handler_failures["b"] == {"dead": 1, "retrying": 0}

    async def test_the_oldest_work_waiting_is_a_dispatch_pending_or_running(
        self, store: Store
    ) -> None:
        await complete(store, "job-1", "a")  # nothing to confirm: a dispatch waits, pending
        pending = await store.backlog()
        assert (pending.resolving, pending.pending) == (0, 1)
        assert pending.oldest_pending_at is not None
        (claimed,) = await claim_all(store, "w1", time.time() + 1)
        running = await store.backlog()
        assert (running.pending, running.running) == (0, 1)
        assert running.oldest_pending_at == pending.oldest_pending_at
        await store.finish_dispatch(claimed.id, "w1", error=None, next_attempt_at=None)
        assert (await store.backlog()).oldest_pending_at is None

    async def test_purge_removes_only_delivered_jobs(self, store: Store) -> None:
        await complete(store, "job-1", "a", resolve=True)
        await complete(store, "job-2", "a", resolve=False)
        now = time.time() + 1
        (row,) = await store.claim_completions("w1", 10, 30, now)
        await store.resolve_completion(row.id, "w1", Resolution(result_path="/r/job-1"))
        claimed = {d.completion_id: d for d in await claim_all(store, "w1", now)}
        await store.finish_dispatch(claimed[row.id].id, "w1", error=None, next_attempt_at=None)
        assert await store.delivered_results(10) == [(row.id, "/r/job-1")]
        assert await store.purge(now + 3600, 10) == (1, ["/r/job-1"])
        assert await store.get_job(SOURCE, "job-1") is None
        assert await store.deliveries_for(SOURCE, "job-1") == []
        assert await store.get_job(SOURCE, "job-2") is not None

    async def test_forgotten_results_are_no_longer_listed_as_delivered(self, store: Store) -> None:
        await complete(store, "job-1", "a", resolve=True)
        now = time.time() + 1
        (row,) = await store.claim_completions("w1", 10, 30, now)
        await store.resolve_completion(row.id, "w1", Resolution(result_path="/r/job-1"))
        (dispatch,) = await claim_all(store, "w1", now)
        await store.finish_dispatch(dispatch.id, "w1", error=None, next_attempt_at=None)
        assert await store.forget_results([]) == 0
        assert await store.forget_results([row.id]) == 1
        assert await store.delivered_results(10) == []

    async def test_completions_are_listed_in_id_order_after_a_given_id(self, store: Store) -> None:
        assert await store.last_completion_id() == 0
        for n in range(3):
            await complete(store, f"job-{n}")
        rows = await store.completions_after(0, 10)
        assert [r.job_id for r in rows] == ["job-0", "job-1", "job-2"]
        assert await store.last_completion_id() == rows[-1].id
        assert [r.job_id for r in await store.completions_after(rows[0].id, 1)] == ["job-1"]

    async def test_a_closed_store_refuses_work(self, store: Store) -> None:
        await store.close()
        with pytest.raises(StoreUnavailableError):
            await store.ingest(news(), ["files"])
        with pytest.raises(StoreUnavailableError):
            await store.ping()
