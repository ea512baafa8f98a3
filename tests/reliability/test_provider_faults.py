"""Races and provider faults against the simulator: webhook vs poll, lost webhooks, 429 storms,
and a presigned URL that expires between two download attempts.

Covered elsewhere and not repeated here: one webhook racing one poll and 30% of webhooks
dropped for every provider (tests/intake/test_poller.py), a single 429's Retry-After and the request
budget (tests/intake/test_poller.py), an expired URL answered 403 on the first try
(tests/test_pipeline.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from receiver.config.load import load_settings
from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import SECRET, free_port, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "sim-reliability-key-0042"


def _settings(
    tmp_path: Path, provider: str, sim_url: str, *, rpm: float = 600, grace: float = 0.0
) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
max_attempts = 3
[dispatch]
lease_seconds = 10
[sources.{provider}]
provider = "{provider}"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.{provider}.poll]
grace_seconds = {grace}
initial_delay = 0.1
max_delay = 0.5
requests_per_minute = {rpm}
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.05
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def _track(app: Any, source: str, job_ids: list[str]) -> None:
    for job_id in job_ids:
        await app.state.ingestor.ingest(
            Event(source=source, job_id=job_id, state=State.QUEUED, provider_status="tracked",
                  via="track")
        )  # fmt: skip


async def _wait_for_files(out: Path, source: str, job_ids: list[str], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not all((out / source / f"{j}.json").exists() for j in job_ids):
            await asyncio.sleep(0.05)


def _api_entries(sim: Simulator) -> list[Any]:
    return [e for e in sim.log if not e.path.startswith(("/blobs/", "/_sim"))]


@pytest.mark.timeout(90)
async def test_webhooks_racing_polls_on_twenty_jobs_dispatch_each_job_once(
    tmp_path: Path,
) -> None:
    port = free_port()
    sim = Simulator("reducto", api_key=API_KEY, webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto",
                    secret=SECRET, duration=0.5, result_bytes=2048, seed=3)  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "reducto", sim_url))
        async with live_server(app, port=port) as url:
            job_ids = sim.create_jobs(20, result="inline")
            await _track(app, "reducto", job_ids)  # polled at once: grace_seconds = 0
            # ... and every completion is also resent by hand, under a new message id.
            import httpx

            async with httpx.AsyncClient() as client:
                await asyncio.sleep(0.6)
                await asyncio.gather(*(
                    client.post(f"{url}/webhooks/reducto", content=reducto_body(j),
                                headers=signed_headers(reducto_body(j), msg_id=f"extra-{j}"))
                    for j in job_ids
                ))  # fmt: skip
            await _wait_for_files(tmp_path / "out", "reducto", job_ids, timeout=60)
            await asyncio.sleep(1.0)  # room for any second dispatch to show up
            store = app.state.store
            dispatches = {j: await store.dispatches_for("reducto", j) for j in job_ids}
    assert {j: [(d.state, d.attempts) for d in ds] for j, ds in dispatches.items()} == {
        j: [("succeeded", 1)] for j in job_ids
    }
    polled = {e.path.rsplit("/", 1)[-1] for e in _api_entries(sim)}
    assert polled, "the poller never ran: nothing raced"


@pytest.mark.timeout(90)
async def test_a_429_storm_is_waited_out_without_asking_before_retry_after(
    tmp_path: Path,
) -> None:
    sim = Simulator("knowhere", api_key=API_KEY, duration=0.0, result_bytes=1024,
                    requests_per_minute=120)  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "knowhere", sim_url, rpm=120))
        async with live_server(app):
            job_ids = sim.create_jobs(6)
            sim.inject(status=429, retry_after=1, count=8)
            await _track(app, "knowhere", job_ids)
            await _wait_for_files(tmp_path / "out", "knowhere", job_ids, timeout=60)
    entries = _api_entries(sim)
    storm = [e for e in entries if e.status == 429]
    assert len(storm) == 8
    assert not [e for e in entries if e.reason == "rate_limited"], "the budget was exceeded"
    early = []
    for refused in storm:
        answered = refused.t + refused.elapsed_ms / 1000
        until = refused.t + (refused.retry_after or 0)
        # A request already under way when the 429 came back is no violation.
        early += [e for e in entries if answered + 0.05 < e.t < until - 0.02]
    assert not early, f"asked again before Retry-After: {[(e.seq, e.t) for e in early]}"


@pytest.mark.timeout(60)
async def test_a_presigned_url_expiring_between_retries_is_refreshed(tmp_path: Path) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0, url_ttl=1.0,
                    result_bytes=256 * 1024)  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "reducto", sim_url, grace=3600))
        async with live_server(app) as url:
            (job_id,) = sim.create_jobs(1, result="url")
            # The blob host is slow and fails once: by the retry, the URL has expired.
            sim.inject(target="blobs", status=503, latency=1.5, count=1)
            import httpx

            async with httpx.AsyncClient() as client:
                body = reducto_body(job_id)
                response = await client.post(
                    f"{url}/webhooks/reducto", content=body, headers=signed_headers(body)
                )
            assert response.status_code == 200
            await _wait_for_files(tmp_path / "out", "reducto", [job_id], timeout=30)
    document = json.loads((tmp_path / "out" / "reducto" / f"{job_id}.json").read_text())
    blobs = [e.reason for e in sim.log if e.path.startswith("/blobs/")]
    job_gets = [e for e in sim.log if e.path == f"/job/{job_id}"]
    assert blobs == ["fault", "expired", "ok"]
    assert len(job_gets) == 2  # the confirmation, then one refresh for a fresh URL
    assert document["result"]["bytes"] == 256 * 1024


@pytest.mark.reliability
@pytest.mark.timeout(600)
async def test_two_hundred_jobs_complete_with_30_percent_of_webhooks_dropped(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    started = time.monotonic()
    port = free_port()
    sim = Simulator("reducto", api_key=API_KEY, webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto",
                    secret=SECRET, drop=0.3, seed=9, duration=2.0, result_bytes=4096,
                    requests_per_minute=600)  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "reducto", sim_url, rpm=600, grace=1.0))
        async with live_server(app, port=port):
            job_ids = sim.create_jobs(200, result="inline")
            try:
                await _track(app, "reducto", job_ids)
                await _wait_for_files(tmp_path / "out", "reducto", job_ids, timeout=400)
            finally:  # the figures also when the wait times out: how far it got
                seconds = time.monotonic() - started
                out = tmp_path / "out" / "reducto"
                completed = sum((out / f"{j}.json").exists() for j in job_ids)
                dropped = [d for d in sim.deliveries if d.state == "dropped"]
                limited = [e for e in sim.log if e.reason == "rate_limited"]
                report_figures(
                    f"jobs={len(job_ids)} completed={completed} webhooks_dropped={len(dropped)} "
                    f"job_api_requests={len(_api_entries(sim))} "
                    f"rate_limit_violations={len(limited)} seconds={seconds:.1f}"
                )
    assert len(dropped) > 30
    assert not limited, "a poll exceeded the budget"
