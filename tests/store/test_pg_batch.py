"""The PostgreSQL store's group commit of ingests (receiver.store.postgres.group_commit):
batches answer and store exactly what one event per transaction would, a bad event fails alone,
and replicas batching the same jobs side by side neither fail nor complete a job twice."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import structlog.testing

from receiver.errors import StoreUnavailableError
from receiver.models import Event, IngestResult, Progress, State
from receiver.store.postgres.store import PostgresStore
from tests.services import postgres_database

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

pytestmark = pytest.mark.postgres
WORDS = {State.QUEUED: "Pending", State.RUNNING: "InProgress", State.SUCCEEDED: "Completed",
         State.FAILED: "Failed"}  # fmt: skip


def ev(job_id: str, state: State, msg: str | None, **kw: Any) -> Event:
    return Event(source=kw.pop("source", "reducto"), job_id=job_id, state=state,
                 provider_status=WORDS[state], via="webhook", message_id=msg, **kw)  # fmt: skip


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def answer(result: IngestResult) -> tuple[Any, ...]:
    """What an ingest answered, its took only as there or not (its value depends on clocks)."""
    return (result.status, result.job_id, result.state, result.completed, result.requeued,
            result.took is None)  # fmt: skip


async def stored(store: PostgresStore, job_id: str, source: str = "reducto") -> tuple[Any, ...]:
    """A job as stored, without its timestamps: row, completion and dispatches."""
    job = await store.get_job(source, job_id)
    assert job is not None
    completion = await store.completion_for(source, job_id)
    dispatches = await store.dispatches_for(source, job_id)
    return (
        job.state, job.provider_status, job.metadata, job.error, job.progress_done,
        job.progress_total, job.terminal_at is None, job.poll_attempts,
        completion and (completion.state, completion.phase, completion.metadata, completion.error),
        [(d.handler, d.state, d.attempts) for d in dispatches],
    )  # fmt: skip


async def with_a_dead_dispatch(store: PostgresStore) -> None:
    """Job ``dead-job`` completed under message ``m-dead``, its handler ``a`` given up on."""
    first = await store.ingest(ev("dead-job", State.SUCCEEDED, "m-dead"), ["a"], resolve=False)
    assert first.completed
    ((dispatch, _),) = await store.claim_dispatches("w", 10, 60, time.time() + 1)
    await store.finish_dispatch(dispatch.id, "w", error="gone", next_attempt_at=None)


# Each event with the handlers its ingest names; in this order, as webhooks arrive.
SCRIPT: list[tuple[Event, list[str]]] = [
    (ev("j1", State.RUNNING, "m1", metadata={"a": 1}, progress=Progress(1, 4)), ["a", "b", "c"]),
    (ev("j2", State.SUCCEEDED, "m2"), ["a"]),
    (ev("j1", State.SUCCEEDED, "m3", metadata={"b": 2}), ["a", "b", "c"]),  # same job, same batch
    (ev("j2", State.SUCCEEDED, "m2"), ["a"]),  # a Svix retry of a message earlier in the batch
    (ev("dead-job", State.SUCCEEDED, "m-dead"), ["a"]),  # a retry of an old one: requeues
    (ev("j3", State.SUCCEEDED, None), []),  # no message id (the poller), no handlers
    (ev("j3", State.SUCCEEDED, "m4"), ["b"]),  # terminal news again: accepted, not completed
    (ev("j4", State.FAILED, "m5", error="boom", error_code="E1"), ["b", "c"]),
    (ev("j4", State.RUNNING, "m6", error="late"), ["b", "c"]),  # late news: the job stays failed
    (ev("j0", State.QUEUED, "m7", poll_at=time.time() + 60, metadata={"x": {"y": 1}}), ["a"]),
    (ev("j0", State.RUNNING, "m8", metadata={"x": {"y": None, "z": 2}}), ["a"]),
    (ev("j5", State.SUCCEEDED, "m9", error="nul\x00byte"), ["nul\x00name"]),
]


async def batched_and_alone(
    url: str, script: list[tuple[Event, list[str]]], history: Callable[[PostgresStore], Any]
) -> list[IngestResult]:
    """``script`` in one batch on one store and one event per transaction on another, both
    after ``history``: the same answers and the same rows of every job, and no batch refused
    (a refused batch runs again one event at a time, which would hide the batch's own error)."""
    async with opened(url) as batched, postgres_database() as other, opened(other) as alone:
        await history(batched)
        await history(alone)
        before = batched.batching.batches
        with structlog.testing.capture_logs() as logs:
            results = await asyncio.gather(
                *(batched.ingest(e, h, resolve=False) for e, h in script)
            )
        assert batched.batching.batches == before + 1, "one batch for all of them"
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [], "not refused"
        expected = [await alone.batching.ingest_alone(e, h, False) for e, h in script]
        assert [answer(r) for r in results] == [answer(r) for r in expected]
        for event, result in zip((e for e, _ in script), results, strict=True):
            kept = await stored(batched, event.job_id, event.source)
            assert kept == await stored(alone, event.job_id, event.source), event
            if result.completed:
                job = await batched.get_job(event.source, event.job_id)
                assert job is not None
                assert job.terminal_at is not None
                assert result.took == job.terminal_at - job.created_at
    return results


async def test_a_batch_answers_and_stores_what_one_event_per_transaction_does(
    postgres_url: str,
) -> None:
    results = await batched_and_alone(postgres_url, SCRIPT, with_a_dead_dispatch)
    assert [r.requeued for r in results][4] == 1
    assert [(r.status, r.completed) for r in results][:4] == [
        ("accepted", False), ("accepted", True), ("accepted", True), ("duplicate", False),
    ]  # fmt: skip


async def with_history(store: PostgresStore) -> None:
    """What the events of ``DISTINCT`` find: a dead dispatch, a job running, one done, one
    failed, and an old message whose job is done."""
    await with_a_dead_dispatch(store)
    for event, handlers in [
        (ev("d-run", State.RUNNING, "h1", metadata={"a": 1, "b": {"c": 1}}), ["a"]),
        (ev("d-done", State.SUCCEEDED, "h2"), ["a"]),
        (ev("d-failed", State.FAILED, "h3", error="boom", error_code="E1"), ["b"]),
        (ev("d-old", State.SUCCEEDED, "h4"), []),
    ]:
        await store.batching.ingest_alone(event, handlers, False)


# One batch in which no job and no message comes twice: migration 14's statements over all of
# its events at once, each case of the one-event path among them.
DISTINCT: list[tuple[Event, list[str]]] = [
    (ev("d-new", State.RUNNING, "n1", metadata={"x": 1}, progress=Progress(1, 4)), ["a", "b"]),
    (ev("d-run", State.SUCCEEDED, "n2", metadata={"b": {"c": None, "d": 2}}), ["a", "b", "c"]),
    (ev("dead-job", State.SUCCEEDED, "m-dead"), ["a"]),  # a retry of an old one: requeues
    (ev("d-old", State.SUCCEEDED, "h4"), ["a"]),  # a retry, nothing dead: changes nothing
    (ev("d-done", State.SUCCEEDED, None), ["b"]),  # no message id (the poller), terminal again
    (ev("d-failed", State.RUNNING, "n3", error="late"), ["b"]),  # late news: stays failed
    (ev("d-queued", State.QUEUED, "n4", poll_at=time.time() + 60), ["a"]),
    (ev("d-fresh", State.FAILED, "n5", error="nul\x00byte", error_code="E2"), ["nul\x00name", "c"]),
    (ev("d-two", State.SUCCEEDED, "n6", source="docurift"), []),  # another source, no handlers
    (ev("d-last", State.SUCCEEDED, "n7", metadata={"k": [1, 2]}), ["c", "a"]),
]


async def test_a_batch_of_distinct_jobs_answers_and_stores_what_one_event_each_does(
    postgres_url: str,
) -> None:
    results = await batched_and_alone(postgres_url, DISTINCT, with_history)
    assert [(r.status, r.completed, r.requeued) for r in results] == [
        ("accepted", False, 0), ("accepted", True, 0), ("duplicate", False, 1),
        ("duplicate", False, 0), ("accepted", False, 0), ("accepted", False, 0),
        ("accepted", False, 0), ("accepted", True, 0), ("accepted", True, 0),
        ("accepted", True, 0),
    ]  # fmt: skip


async def _routes(url: str, events: list[Event]) -> list[str]:
    """The debug messages one direct call of the batch function sends for ``events``."""
    from receiver.store.postgres.ingest import INGEST_BATCH, Ingest, batch_args
    from receiver.store.postgres.pool import _init_connection

    conn = await asyncpg.connect(url)
    heard: list[str] = []
    try:
        await _init_connection(conn)
        await conn.execute("SET client_min_messages = debug1")
        conn.add_log_listener(lambda _conn, message: heard.append(message.message))
        loop = asyncio.get_running_loop()
        batch = [Ingest(e, ["a"], False, time.time(), loop.create_future()) for e in events]
        await conn.fetch(INGEST_BATCH, *batch_args(batch))
        await asyncio.sleep(0.05)  # the listener is called soon after, not within fetch
    finally:
        await conn.close()
    return [m for m in heard if "jobhook_ingest_batch" in m]


async def test_a_batch_with_a_job_or_a_message_twice_or_of_few_events_runs_one_at_a_time(
    postgres_url: str,
) -> None:
    async with opened(postgres_url):
        pass  # migrated
    apart = [ev(f"r-{n}", State.SUCCEEDED, f"r-{n}") for n in range(8)]
    same_job = [*apart[:7], ev("r-0", State.SUCCEEDED, "r-8")]
    same_message = [*apart[:7], ev("r-8", State.SUCCEEDED, "r-0")]
    assert await _routes(postgres_url, apart) == []
    assert await _routes(postgres_url, [e for e, _ in DISTINCT]) == []
    for events in (same_job, same_message, apart[:7]):
        assert await _routes(postgres_url, events) == ["jobhook_ingest_batch: one event at a time"]


async def test_many_concurrent_ingests_share_batches(postgres_url: str) -> None:
    async with opened(postgres_url) as store:
        events = [ev(f"job-{n}", State.SUCCEEDED, f"m-{n}") for n in range(300)]
        results = await asyncio.gather(*(store.ingest(e, ["a", "b"]) for e in events))
        again = await asyncio.gather(*(store.ingest(e, ["a", "b"]) for e in events[::3]))
        assert store.batching.batches <= 15  # 400 events in batches of up to 64
        completions = await store.completions_after(0, 1000)
        dispatches = await store.dispatches_for("reducto", "job-299")
    assert [(r.status, r.completed, r.job_id) for r in results] == [
        ("accepted", True, e.job_id) for e in events]  # fmt: skip
    assert {r.status for r in again} == {"duplicate"}
    assert len(completions) == 300
    assert [d.handler for d in dispatches] == ["a", "b"]


# asyncpg refuses a count wider than bigint; PostgreSQL refuses JSON with Infinity in it (what
# json.dumps writes when orjson gives up on the integer beside it).
BAD = {
    "too-wide": (ev("bad", State.RUNNING, "b", progress=Progress(2**70, 1)), StoreUnavailableError),
    "not-json": (
        ev("bad", State.SUCCEEDED, "b", metadata={"n": 2**70, "x": float("inf")}),
        StoreUnavailableError,
    ),
}


@pytest.mark.parametrize("case", BAD)
async def test_a_bad_event_fails_alone_and_its_neighbours_are_stored(
    postgres_url: str, case: str
) -> None:
    bad, error = BAD[case]
    good = [ev(f"ok-{n}", State.SUCCEEDED, f"ok-{n}") for n in range(10)]
    events = [*good[:5], bad, *good[5:]]
    async with opened(postgres_url) as store:
        results = await asyncio.gather(
            *(store.ingest(e, ["a"]) for e in events), return_exceptions=True
        )
        assert store.batching.batches == 1
        for e in good:
            assert (await store.get_job("reducto", e.job_id)) is not None
        assert await store.get_job("reducto", "bad") is None
    assert type(results.pop(5)) is error
    assert [r.status for r in results if isinstance(r, IngestResult)] == ["accepted"] * 10


async def test_a_delivery_whose_job_is_gone_is_a_duplicate_and_changes_nothing(
    postgres_url: str,
) -> None:
    """A message seen before whose job is gone (a purge racing its delivery): it was delivered,
    so it is a duplicate, answered with the news it brings, and no job comes back for it."""
    events = [ev(f"ok-{n}", State.SUCCEEDED, f"ok-{n}") for n in range(4)]
    orphan = ev("bad", State.RUNNING, "b")
    async with opened(postgres_url) as store:
        await _sql(postgres_url, "INSERT INTO deliveries VALUES ('reducto', 'b', 'bad', "
                                 "'running', 'InProgress', 0)")  # fmt: skip
        results = await asyncio.gather(*(store.ingest(e, ["a"]) for e in [*events, orphan]))
        assert await store.get_job("reducto", "bad") is None
        alone = await store.ingest(orphan, ["a"])
        assert await store.get_job("reducto", "bad") is None
    assert [r.status for r in results] == ["accepted"] * 4 + ["duplicate"]
    assert (alone.status, alone.state) == ("duplicate", State.RUNNING)


async def _sql(url: str, query: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(query)
    finally:
        await conn.close()


async def test_a_caller_cancelled_while_waiting_still_has_its_event_stored(
    postgres_url: str,
) -> None:
    async with opened(postgres_url) as store:
        tasks = [asyncio.create_task(store.ingest(ev(f"c-{n}", State.SUCCEEDED, f"c-{n}"), ["a"]))
                 for n in range(20)]  # fmt: skip
        await asyncio.sleep(0)  # each has queued its event and waits
        tasks[7].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(done[7], asyncio.CancelledError)
    async with opened(postgres_url) as store:
        job = await store.get_job("reducto", "c-7")
        again = await store.ingest(ev("c-7", State.SUCCEEDED, "c-7"), ["a"])
    assert job is not None
    assert job.state == "succeeded"
    assert again.status == "duplicate"


async def test_closing_stores_what_is_queued_then_refuses(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    with pytest.raises(StoreUnavailableError):
        await store.ingest(ev("early", State.SUCCEEDED, "early"), ["a"])
    await store.open()
    tasks = [asyncio.create_task(store.ingest(ev(f"q-{n}", State.SUCCEEDED, f"q-{n}"), ["a"]))
             for n in range(200)]  # fmt: skip
    await asyncio.sleep(0)
    await store.close()
    assert {(await t).status for t in tasks} == {"accepted"}
    with pytest.raises(StoreUnavailableError):
        await store.ingest(ev("late", State.SUCCEEDED, "late"), ["a"])
    async with opened(postgres_url) as reopened:
        assert len(await reopened.completions_after(0, 1000)) == 200


async def test_replicas_batching_the_same_jobs_fail_none_and_complete_each_once(
    postgres_url: str,
) -> None:
    jobs = [f"r-{n}" for n in range(120)]

    def news(replica: int) -> list[Event]:
        # Both replicas hear of every job (in opposite orders): its progress under their own
        # message ids, its completion under one shared id (the same webhook delivered to both).
        order = jobs if replica == 0 else jobs[::-1]
        return [e for j in order for e in (ev(j, State.RUNNING, f"{j}-run-{replica}"),
                                           ev(j, State.SUCCEEDED, f"{j}-done"))]  # fmt: skip

    async with opened(postgres_url) as one, opened(postgres_url) as two:
        results = await asyncio.gather(
            *(one.ingest(e, ["a", "b"]) for e in news(0)),
            *(two.ingest(e, ["a", "b"]) for e in news(1)),
        )
        completions = await one.completions_after(0, 1000)
        dispatches = await two.dispatches_for("reducto", "r-17")
    assert sum(r.completed for r in results) == len(jobs)
    assert sum(r.status == "duplicate" for r in results) == len(jobs)
    assert sorted(c.job_id for c in completions) == sorted(jobs)
    assert [d.handler for d in dispatches] == ["a", "b"]


async def test_a_job_first_seen_by_a_batch_and_another_at_once_keeps_one_id(
    postgres_url: str,
) -> None:
    """As below, the second transaction a batch of distinct jobs (migration 14's statements):
    its upsert waits for the first's row of the job, takes it, and moves its delivery."""
    from receiver.store.postgres.ingest import Ingest, ingest_batch, ingest_one

    async with opened(postgres_url):
        pass  # migrated
    first, second = await asyncpg.connect(postgres_url), await asyncpg.connect(postgres_url)
    loop = asyncio.get_running_loop()
    try:
        one = first.transaction()
        await one.start()
        await ingest_one(
            first, Ingest(ev("both", State.RUNNING, "m-a"), [], False, time.time(),
                          loop.create_future())
        )  # fmt: skip
        batch = [
            Ingest(ev(job, State.SUCCEEDED, f"m-{job}"), ["a"], False, time.time(),
                   loop.create_future())
            for job in ("aaa", "both", "c", "d", "e", "f", "g", "zzz")
        ]  # fmt: skip
        racing = asyncio.create_task(ingest_batch(second, batch))
        await asyncio.sleep(0.3)
        assert not racing.done()  # waiting for the first's row of the job
        await one.commit()
        results = await racing
        ids = await first.fetch("SELECT DISTINCT job FROM deliveries WHERE job_id = 'both'")
        job = await first.fetchval("SELECT id FROM jobs WHERE job_id = 'both'")
        completed_for = await first.fetchval("SELECT job FROM completions WHERE job_id = 'both'")
    finally:
        await first.close()
        await second.close()
    assert [(r.status, r.completed) for r in results] == [("accepted", True)] * 8
    assert [r[0] for r in ids] == [job] == [completed_for]


async def test_a_job_first_seen_by_two_transactions_at_once_keeps_one_id(postgres_url: str) -> None:
    """Two replicas see a new job at once under two messages: each draws an id, the second's
    insert of the job waits for the first's and takes its row, and moves its delivery to that
    job's id, so the job has one id and both deliveries."""
    from receiver.store.postgres.ingest import Ingest, ingest_one

    async with opened(postgres_url):
        pass  # migrated
    first, second = await asyncpg.connect(postgres_url), await asyncpg.connect(postgres_url)
    done: asyncio.Future[IngestResult] = asyncio.get_running_loop().create_future()
    try:
        one, two = first.transaction(), second.transaction()
        await one.start()
        await ingest_one(
            first, Ingest(ev("both", State.RUNNING, "m-a"), [], False, time.time(), done)
        )
        await two.start()
        racing = asyncio.create_task(ingest_one(
            second, Ingest(ev("both", State.SUCCEEDED, "m-b"), ["a"], False, time.time(), done)
        ))  # fmt: skip
        await asyncio.sleep(0.3)
        assert not racing.done()  # waiting for the first's row of the job
        await one.commit()
        result = await racing
        await two.commit()
        ids = await first.fetch("SELECT DISTINCT job FROM deliveries WHERE job_id = 'both'")
        job = await first.fetchval("SELECT id FROM jobs WHERE job_id = 'both'")
        completed_for = await first.fetchval("SELECT job FROM completions WHERE job_id = 'both'")
    finally:
        await first.close()
        await second.close()
    assert (result.status, result.completed) == ("accepted", True)
    assert [r[0] for r in ids] == [job] == [completed_for]
    async with opened(postgres_url) as store:
        deliveries = await store.deliveries_for("reducto", "both")
    assert sorted(d.message_id for d in deliveries) == ["m-a", "m-b"]
