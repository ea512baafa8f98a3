"""5,000 Reducto completions at once against a simulator allowing 600 requests a minute, in
virtual time: confirmations go before routine polls, the budget learns the server's limit and
never exceeds it, and the drain ETA is told while it is too long."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import TYPE_CHECKING

import httpx
from structlog.testing import capture_logs

from receiver.models import Event, State
from receiver.pipeline.drain import DrainWatch
from receiver.providers import get_provider
from receiver.providers.jobapi import JobAPI
from receiver.providers.ratelimit import HEADROOM, RateLimiter, default_budget
from receiver.secret import Secret
from receiver.sim import Simulator, build_app
from receiver.sim.clock import ManualClock
from receiver.store.sqlite.store import SQLiteStore
from tests.sim.helpers import API_KEY

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from pathlib import Path
    from typing import Any

BURST = 5_000
QUIET_JOBS = 20  # running jobs with no news, polled routinely meanwhile
SERVER_LIMIT = 600
WORKERS = 8  # the dispatcher's default concurrency


class VirtualTime:
    """Sleeps that take no real time: when every worker sleeps, the clock jumps to the first
    wake-up. The simulator reads the same clock."""

    def __init__(self) -> None:
        self.sim_clock = ManualClock(start=1_900_000_000.0)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.sim_clock.time()

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.clock() + seconds, next(self._order), future))
        await future

    async def run(self, workers: list[Coroutine[Any, Any, None]]) -> None:
        tasks = [asyncio.create_task(w) for w in workers]
        while live := sum(not t.done() for t in tasks):
            await asyncio.sleep(0)
            if len(self._sleepers) >= live:
                wake, _, future = heapq.heappop(self._sleepers)
                self.sim_clock.advance(max(wake - self.clock(), 0.0))
                future.set_result(None)
        await asyncio.gather(*tasks)


async def test_a_burst_of_5000_confirmations_drains_first_within_the_learned_budget(
    tmp_path: Path,
) -> None:
    vt = VirtualTime()
    sim = Simulator("reducto", api_key=API_KEY, requests_per_minute=SERVER_LIMIT,
                    clock=vt.sim_clock)  # fmt: skip
    done = sim.create_jobs(BURST, duration=0)
    quiet = set(sim.create_jobs(QUIET_JOBS, duration=1_000_000))
    limiter = RateLimiter(default_budget("reducto"), name="reducto", learn=True,
                          clock=vt.clock, sleep=vt.sleep)  # fmt: skip
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    transport = httpx.ASGITransport(app=build_app(sim))
    try:
        for job_id in done:  # the webhooks: completed, no result, to be confirmed
            await store.ingest(
                Event(source="reducto", job_id=job_id, state=State.SUCCEEDED,
                      provider_status="Completed", via="webhook", message_id=f"m-{job_id}"),
                ["files"],
            )  # fmt: skip
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
            api = JobAPI(source="reducto", provider=get_provider("reducto"),
                         base_url="http://sim", api_key=Secret(API_KEY), client=client,
                         limiter=limiter)  # fmt: skip
            watch = DrainWatch(store, {"reducto": api}, within=600.0, clock=vt.clock)
            with capture_logs() as logs:
                before = await watch.run_once()
                again = await watch.run_once()  # at most one warning per period
            assert before["reducto"].confirmations == BURST
            assert before["reducto"].slow
            assert before["reducto"].eta_seconds == BURST / default_budget("reducto") * 60
            assert again["reducto"].slow
            warnings = [e for e in logs if e["event"] == "confirmation_backlog_slow"]
            assert len(warnings) == 1
            assert warnings[0]["eta_seconds"] == round(BURST / default_budget("reducto") * 60)

            queue = list(done)
            kinds: list[tuple[float, str]] = []

            async def confirm() -> None:
                while queue:
                    job_id = queue.pop()
                    status = await api.get_job(job_id, urgent=True)
                    assert status.state is State.SUCCEEDED
                    kinds.append((vt.clock(), "confirm"))

            async def poll() -> None:
                for job_id in itertools.islice(itertools.cycle(sorted(quiet)), 40):
                    await api.get_job(job_id)
                    kinds.append((vt.clock(), "poll"))

            started = vt.clock()
            await vt.run([*(confirm() for _ in range(WORKERS)), poll()])
            drained = max(t for t, kind in kinds if kind == "confirm") - started
            after = await watch.run_once()
    finally:
        await store.close()

    learned = SERVER_LIMIT * HEADROOM
    assert limiter.requests_per_minute == learned
    assert after["reducto"].budget_per_minute == learned
    assert not after["reducto"].slow, "at the learned budget 5,000 drain within 10 minutes"
    assert after["reducto"].eta_seconds == BURST / learned * 60
    # It drained as fast as the learned budget allows, and as the ETA said.
    assert BURST / learned * 60 * 0.97 < drained < BURST / learned * 60 * 1.05
    # Order of work: routine polls waited until no confirmation was waiting.
    confirms = [t for t, kind in kinds if kind == "confirm"]
    polls = [t for t, kind in kinds if kind == "poll"]
    assert len(confirms) == BURST
    assert len(polls) == 40
    assert sum(1 for t in polls if t < confirms[-1]) <= 1, "a poll went before confirmations"
    # Never above the server's limit: no 429, and no 60 s window holds more than the limit.
    entries = sim.log.entries()
    assert [e.status for e in entries if e.status != 200] == []
    times = sorted(e.t for e in entries)
    ahead = 0
    for i, t in enumerate(times):
        while times[ahead] <= t - 60:
            ahead += 1
        assert i - ahead + 1 <= SERVER_LIMIT
