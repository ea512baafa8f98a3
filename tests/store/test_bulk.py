"""Replay by filter in chunks, on every backend: the count a dry run reports, chunk by chunk
in id order, only rows still in the selected state (so a second run requeues nothing)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from receiver.models import State
from receiver.store.bulk import ReplayFilter
from receiver.store.rows import JobFilter
from tests.store.test_contract import SOURCE, claim_all, news

if TYPE_CHECKING:
    from receiver.store import Store


async def dead_world(store: Store) -> float:
    """Ten jobs with handlers a and b: a died on every job, b on the even ones (b succeeded on
    the odd ones); jobs 0-4 have metadata team=x. Returns the time of the deaths."""
    for n in range(10):
        metadata = {"team": "x" if n < 5 else "y"}
        event = news(f"job-{n}", State.SUCCEEDED, f"m{n}", metadata=metadata)
        await store.ingest(event, ["a", "b"], resolve=False)
    now = time.time() + 1
    for d in await claim_all(store, "w1", now):
        dies = d.handler == "a" or d.completion_id % 2 == 1  # ids start at 1: odd id, even job
        await store.finish_dispatch(
            d.id, "w1", error="down" if dies else None, next_attempt_at=None,
            error_code="http_5xx" if dies else None,
        )  # fmt: skip
    return now


async def replay_all(store: Store, f: ReplayFilter, chunk: int) -> tuple[int, int]:
    """Requeue chunk by chunk; (requeued, calls)."""
    after: int | None = 0
    requeued = calls = 0
    while after is not None:
        changed, after = await store.replay_chunk(f, after, chunk, time.time())
        requeued += changed
        calls += 1
    return requeued, calls


async def test_a_dry_run_counts_what_the_filter_selects(store: Store) -> None:
    await dead_world(store)
    assert await store.count_replayable(ReplayFilter(JobFilter())) == 15
    assert await store.count_replayable(ReplayFilter(JobFilter(), handler="b")) == 5
    team = JobFilter(metadata=(("team", "x"),))
    assert await store.count_replayable(ReplayFilter(team, handler="a")) == 5
    assert await store.count_replayable(ReplayFilter(JobFilter(error_code="http_5xx"))) == 15
    assert await store.count_replayable(ReplayFilter(JobFilter(), "succeeded")) == 5
    later = ReplayFilter(JobFilter(), since=time.time() + 3600)
    assert await store.count_replayable(later) == 0


async def test_replay_goes_chunk_by_chunk_and_a_second_run_requeues_nothing(
    store: Store,
) -> None:
    await dead_world(store)
    f = ReplayFilter(JobFilter(source=SOURCE), handler="a")
    assert await replay_all(store, f, chunk=3) == (10, 5)  # 4 chunks with rows, 1 that ends
    states = {d.state for n in range(10) for d in await store.dispatches_for(SOURCE, f"job-{n}")
              if d.handler == "a"}  # fmt: skip
    assert states == {"pending"}
    assert (await replay_all(store, f, chunk=3))[0] == 0
    assert await store.count_replayable(ReplayFilter(JobFilter())) == 5  # b's dead ones are left
