"""The Reprocessor against the DocExtract simulator's faults, on a real SQLite store: 5xx and
429 are retried within the budget, what still fails is reported and claimable again (never
lost), a timed-out or refused submission is not sent twice, a job the provider no longer has is
not reprocessable, and a job still running is not submitted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.models import Event, State
from receiver.pipeline.reprocess import ATTEMPTS, Reprocessor
from receiver.providers import get_provider
from receiver.providers.jobapi import JobAPI
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret
from receiver.sim import Simulator, build_app
from receiver.store.sqlite.store import SQLiteStore
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

API_KEY = "sim-key-faults"


class Harness:
    def __init__(self, sim: Simulator, store: SQLiteStore, reprocessor: Reprocessor) -> None:
        self.sim, self.store, self.reprocessor = sim, store, reprocessor
        self.sleeps: list[float] = []

    def posts(self) -> int:
        return sum(1 for e in self.sim.log.entries() if e.method == "POST")

    async def failed_job(self, state: State = State.FAILED) -> str:
        (job_id,) = self.sim.create_jobs(outcome="failed", error_code="processing_timeout",
                                         duration=0)  # fmt: skip
        await self.store.ingest(Event(source="docextract", job_id=job_id, state=state,
                                      provider_status="failed", via="webhook",
                                      message_id=f"m-{job_id}"), [])  # fmt: skip
        return job_id

    async def reprocess(self, job_id: str) -> tuple[str, str | None, str | None]:
        row = await self.store.get_job("docextract", job_id)
        assert row is not None
        outcome = await self.reprocessor.reprocess(row)
        return outcome.status, outcome.new_job_id, outcome.detail


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    sim = Simulator("docextract", api_key=API_KEY, duration=0.0, requests_per_minute=6000)
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    try:
        async with (
            live_server(build_app(sim)) as url,
            httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.5)) as client,
        ):
            limiter = RateLimiter(6000, name="docextract", sleep=sleep)
            api = JobAPI(source="docextract", provider=get_provider("docextract"), base_url=url,
                         api_key=Secret(API_KEY), client=client, limiter=limiter)  # fmt: skip

            async def track(event: Event) -> None:
                await store.ingest(event, [])

            reprocessor = Reprocessor(store, {"docextract": api},
                                      {"docextract": get_provider("docextract")}, track,
                                      owner="w1", sleep=sleep)  # fmt: skip
            found = Harness(sim, store, reprocessor)
            found.sleeps = sleeps
            yield found
    finally:
        await store.close()


async def test_a_503_and_a_429_are_retried_within_the_budget(harness: Harness) -> None:
    job_id = await harness.failed_job()
    harness.sim.inject(status=503)
    harness.sim.inject(status=429, retry_after=2)
    status, new_id, _ = await harness.reprocess(job_id)
    assert status == "submitted"
    assert new_id is not None
    assert 2 in harness.sleeps  # the 429's Retry-After was waited out
    assert harness.posts() == 1
    tracked = await harness.store.get_job("docextract", new_id)
    assert tracked is not None
    assert tracked.metadata["reprocessed_from"] == {"source": "docextract", "job_id": job_id}


async def test_a_provider_down_for_every_attempt_is_reported_and_claimable_again(
    harness: Harness,
) -> None:
    job_id = await harness.failed_job()
    harness.sim.inject(status=503, count=ATTEMPTS)
    status, new_id, detail = await harness.reprocess(job_id)
    assert (status, new_id) == ("failed", None)
    assert detail is not None
    assert "503" in detail
    link = await harness.store.reprocess_of("docextract", job_id)
    assert link is not None
    assert (link.state, link.error) == ("failed", detail)
    assert harness.posts() == 0
    status, new_id, _ = await harness.reprocess(job_id)  # the provider is back
    assert status == "submitted"
    assert harness.posts() == 1


async def test_a_timed_out_submission_is_reported_not_sent_again(harness: Harness) -> None:
    job_id = await harness.failed_job()
    harness.sim.inject(latency=0.01)  # the GET
    harness.sim.inject(latency=1.0)  # the POST: past the client's 0.5 s read timeout
    status, _, detail = await harness.reprocess(job_id)
    assert status == "failed"
    assert detail is not None
    assert "timed out" in detail
    # Sent once: the provider may have created the job, so sending it again could make two.
    assert harness.reprocessor.apis["docextract"].calls == {"200": 1, "timeout": 1}
    link = await harness.store.reprocess_of("docextract", job_id)
    assert link is not None
    assert link.state == "unknown"  # reported; only a forced call submits it again
    assert (await harness.reprocess(job_id))[0] == "already_reprocessed"
    row = await harness.store.get_job("docextract", job_id)
    assert row is not None
    assert (await harness.reprocessor.reprocess(row, force=True)).status == "submitted"


async def test_a_refused_submission_is_not_retried(harness: Harness) -> None:
    job_id = await harness.failed_job()
    harness.sim.inject(latency=0.01)
    harness.sim.inject(status=400)
    status, _, detail = await harness.reprocess(job_id)
    assert status == "failed"
    assert detail is not None
    assert "refused with 400" in detail
    assert len([e for e in harness.sim.log.entries() if e.method == "POST"]) == 1


async def test_a_job_the_provider_no_longer_has_is_not_reprocessable(harness: Harness) -> None:
    await harness.store.ingest(Event(source="docextract", job_id="gone", state=State.FAILED,
                                     provider_status="failed", via="webhook",
                                     message_id="m-gone"), [])  # fmt: skip
    status, _, detail = await harness.reprocess("gone")
    assert status == "not_reprocessable"
    assert detail == "docextract: job gone is gone from the provider"


async def test_a_running_job_is_not_submitted(harness: Harness) -> None:
    job_id = await harness.failed_job(State.RUNNING)
    status, _, detail = await harness.reprocess(job_id)
    assert status == "not_reprocessable"
    assert detail is not None
    assert "still running" in detail
    assert harness.posts() == 0
