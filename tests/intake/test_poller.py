"""The fallback poller against the simulator: lost webhooks, rate budgets, Retry-After, races."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "sim-key-123"
WEBHOOK_PATHS = {"reducto": "reducto", "docurift": "docurift", "knowhere": "knowhere",
                 "docextract": "docextract"}  # fmt: skip


def poll_settings(
    tmp_path: Path,
    provider: str,
    sim_url: str,
    *,
    rpm: float = 300,
    grace: float = 0.3,
    extra: str = "",
) -> Settings:
    config = tmp_path / f"{provider}.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.{provider}]
provider = "{provider}"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
{extra}
[sources.{provider}.poll]
grace_seconds = {grace}
initial_delay = 0.2
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


async def _track(app: Any, provider: str, job_ids: list[str]) -> None:
    for job_id in job_ids:
        await app.state.ingestor.ingest(
            Event(
                source=provider,
                job_id=job_id,
                state=State.QUEUED,
                provider_status="tracked",
                via="track",
            )
        )


async def _wait_for_files(out: Path, provider: str, job_ids: list[str], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not all((out / provider / f"{j}.json").exists() for j in job_ids):
            await asyncio.sleep(0.05)


def _api_entries(sim: Simulator) -> list[Any]:
    return [e for e in sim.log if not e.path.startswith(("/blobs/", "/_sim"))]


@pytest.mark.parametrize("provider", ["reducto", "docurift", "knowhere", "docextract"])
@pytest.mark.timeout(90)
async def test_every_tracked_job_completes_with_30_percent_of_webhooks_dropped(
    tmp_path: Path, provider: str
) -> None:
    receiver_port_holder: dict[str, str] = {}
    from tests.support import free_port

    port = free_port()
    receiver_url = f"http://127.0.0.1:{port}"
    receiver_port_holder["url"] = receiver_url
    sim = Simulator(
        provider, api_key=API_KEY, webhook_url=f"{receiver_url}/webhooks/{provider}",
        secret=SECRET, drop=0.3, seed=7, duration=1.0, requests_per_minute=300,
        result_bytes=64 * 1024,
    )  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        settings = poll_settings(tmp_path, provider, sim_url)
        app = create_app(settings)
        async with live_server(app, port=port):
            job_ids = sim.create_jobs(10)
            await _track(app, provider, job_ids)
            await _wait_for_files(tmp_path / "out", provider, job_ids, timeout=60)
    documents = [
        json.loads((tmp_path / "out" / provider / f"{j}.json").read_text()) for j in job_ids
    ]
    assert all(d["state"] == "succeeded" for d in documents)
    assert all(d["result"] is not None and d["result"]["bytes"] > 0 for d in documents)
    dropped = [d for d in sim.deliveries if d.state == "dropped"]
    assert dropped, "the simulator dropped no webhook: the poller was not exercised"
    assert not [e for e in sim.log if e.status == 429], "a request exceeded the budget"


@pytest.mark.timeout(60)
async def test_poller_never_exceeds_the_request_budget(tmp_path: Path) -> None:
    # No webhooks at all: every job completes through polls, at 60 requests per minute.
    sim = Simulator("knowhere", api_key=API_KEY, duration=2.0, requests_per_minute=60,
                    rate_window=60, result_bytes=1024)  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        settings = poll_settings(tmp_path, "knowhere", sim_url, rpm=60, grace=0.0)
        app = create_app(settings)
        async with live_server(app):
            job_ids = sim.create_jobs(4)
            await _track(app, "knowhere", job_ids)
            await _wait_for_files(tmp_path / "out", "knowhere", job_ids, timeout=45)
    entries = _api_entries(sim)
    times = sorted(e.t for e in entries)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 60 / 60 * 0.99 for g in gaps), f"requests closer than the budget: {gaps}"
    assert not [e for e in entries if e.status == 429]


@pytest.mark.timeout(60)
async def test_retry_after_of_a_429_is_respected(tmp_path: Path) -> None:
    sim = Simulator("knowhere", api_key=API_KEY, duration=0.0, result_bytes=1024)
    async with live_server(build_app(sim)) as sim_url:
        settings = poll_settings(tmp_path, "knowhere", sim_url, grace=0.0)
        app = create_app(settings)
        async with live_server(app):
            (job_id,) = sim.create_jobs(1)
            sim.inject(status=429, retry_after=2, count=1)
            await _track(app, "knowhere", [job_id])
            await _wait_for_files(tmp_path / "out", "knowhere", [job_id], timeout=30)
    entries = _api_entries(sim)
    assert entries[0].status == 429
    assert entries[1].t - entries[0].t >= 2.0, "asked again before Retry-After elapsed"


async def test_webhook_racing_a_poll_dispatches_once(tmp_path: Path) -> None:
    from tests.support import reducto_body, signed_headers

    sim = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=1024)
    async with live_server(build_app(sim)) as sim_url:
        settings = poll_settings(tmp_path, "reducto", sim_url, grace=0.0)
        app = create_app(settings)
        async with live_server(app) as url, httpx.AsyncClient() as client:
            (job_id,) = sim.create_jobs(1, result="inline")
            body = reducto_body(job_id)
            await asyncio.gather(
                _track(app, "reducto", [job_id]),
                *(client.post(f"{url}/webhooks/reducto", content=body,
                              headers=signed_headers(body, msg_id=f"m{n}")) for n in range(3)),
            )  # fmt: skip
            await _wait_for_files(tmp_path / "out", "reducto", [job_id], timeout=20)
            await asyncio.sleep(1.0)  # give a second dispatch every chance to happen
            store = app.state.store
            dispatches = await store.dispatches_for("reducto", job_id)
    assert [(d.handler, d.state, d.attempts) for d in dispatches] == [("files", "succeeded", 1)]


async def _poller_parts(tmp_path: Path, sim_url: str, **kw: Any) -> tuple[Any, Any, Any]:
    import httpx as _httpx

    from receiver.intake.ingest import Ingestor
    from receiver.intake.poller import Poller
    from receiver.providers import get_provider
    from receiver.providers.jobapi import JobAPI
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret
    from receiver.store.sqlite.store import SQLiteStore

    settings = poll_settings(tmp_path, "reducto", sim_url)
    store = SQLiteStore(tmp_path / "poll.db")
    await store.open()
    client = _httpx.AsyncClient()
    api = JobAPI(source="reducto", provider=get_provider("reducto"), base_url=sim_url,
                 api_key=Secret(API_KEY), client=client, limiter=RateLimiter(600))  # fmt: skip
    poll = {"reducto": settings.sources["reducto"].poll}
    ingestor = Ingestor(store, settings.handlers, resolving={"reducto"}, polling=poll)
    poller = Poller(store, ingestor, {"reducto": api}, poll, **kw)
    return store, client, poller


async def test_only_one_poller_leads_per_store(tmp_path: Path) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as sim_url:
        store, client, first = await _poller_parts(tmp_path, sim_url, owner="a")
        try:
            from receiver.intake.poller import Poller

            second = Poller(store, first.ingestor, first.apis, first.settings, owner="b")
            await first.run_once()
            await second.run_once()
            assert (first.leader, second.leader) == (True, False)
            await first.run_once()
            assert first.leader
        finally:
            await client.aclose()
            await store.close()


async def test_job_past_give_up_after_hours_becomes_expired(tmp_path: Path) -> None:
    import time

    sim = Simulator("reducto", api_key=API_KEY, duration=10_000.0)
    async with live_server(build_app(sim)) as sim_url:
        later = time.time() + 31 * 3600
        store, client, poller = await _poller_parts(tmp_path, sim_url, clock=lambda: later)
        try:
            (job_id,) = sim.create_jobs(1)
            await _track_ingestor(poller.ingestor, "reducto", job_id)
            job = await store.get_job("reducto", job_id)
            await poller.poll_job(job)
            job = await store.get_job("reducto", job_id)
            assert job.state == "expired"
            assert "no terminal status" in job.error
            assert await store.completion_for("reducto", job_id) is not None
        finally:
            await client.aclose()
            await store.close()


async def test_poll_records_progress_and_schedules_the_next_poll(tmp_path: Path) -> None:
    sim = Simulator("knowhere", api_key=API_KEY, duration=10_000.0, pages=120)
    async with live_server(build_app(sim)) as sim_url:
        from receiver.intake.ingest import Ingestor
        from receiver.providers import get_provider
        from receiver.providers.jobapi import JobAPI
        from receiver.providers.ratelimit import RateLimiter
        from receiver.secret import Secret

        store, client, poller = await _poller_parts(tmp_path, sim_url)
        api = JobAPI(source="reducto", provider=get_provider("knowhere"), base_url=sim_url,
                     api_key=Secret(API_KEY), client=client, limiter=RateLimiter(600))  # fmt: skip
        poller.apis["reducto"] = api
        assert isinstance(poller.ingestor, Ingestor)
        try:
            (job_id,) = sim.create_jobs(1, pages=120)
            await asyncio.sleep(1.0)
            await _track_ingestor(poller.ingestor, "reducto", job_id)
            await poller.poll_job(await store.get_job("reducto", job_id))
            job = await store.get_job("reducto", job_id)
            assert job.state in ("queued", "running")
            assert job.progress_total == 120
            assert job.poll_attempts == 1
        finally:
            await client.aclose()
            await store.close()


async def _track_ingestor(ingestor: Any, source: str, job_id: str) -> None:
    await ingestor.ingest(
        Event(source=source, job_id=job_id, state=State.QUEUED, provider_status="tracked",
              via="track")
    )  # fmt: skip


async def test_a_job_api_answer_nested_too_deeply_is_a_provider_error() -> None:
    """json.loads' RecursionError escaped JobAPI's handling of bad JSON as an unexpected error."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from receiver.errors import ProviderError
    from receiver.providers import get_provider
    from receiver.providers.jobapi import JobAPI
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret

    async def deep(request: object) -> Response:
        return Response(b"[" * 10_000 + b"]" * 10_000, media_type="application/json")

    app = Starlette(routes=[Route("/job/{job_id}", deep)])
    async with live_server(app) as url, httpx.AsyncClient() as client:
        api = JobAPI(source="reducto", provider=get_provider("reducto"), base_url=url,
                     api_key=Secret(API_KEY), client=client, limiter=RateLimiter(600))  # fmt: skip
        with pytest.raises(ProviderError, match="invalid JSON"):
            await api.get_job("job-1")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("extra", "version"), [("", "v2"), ('api_version = "v1"', "v1")])
async def test_knowhere_polls_speak_the_configured_api_version(
    tmp_path: Path, extra: str, version: str
) -> None:
    # v2 is the default (what Knowhere's SDK speaks); a v1 configuration keeps working.
    sim = Simulator("knowhere", api_key=API_KEY, duration=0.0, result_bytes=1024)
    async with live_server(build_app(sim)) as sim_url:
        settings = poll_settings(tmp_path, "knowhere", sim_url, grace=0.0, extra=extra)
        app = create_app(settings)
        async with live_server(app):
            (job_id,) = sim.create_jobs(1)
            await _track(app, "knowhere", [job_id])
            await _wait_for_files(tmp_path / "out", "knowhere", [job_id], timeout=30)
    paths = {e.path for e in _api_entries(sim)}
    assert paths == {f"/{version}/jobs/{job_id}"}


async def test_a_job_is_not_asked_again_before_its_answers_retry_after(tmp_path: Path) -> None:
    import time

    from receiver.providers import get_provider
    from receiver.providers.azure import AzureJobAPI
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret
    from receiver.sim.azure import AzureDocIntelSim, Operation

    sim = AzureDocIntelSim(api_key=API_KEY, duration=10_000.0, retry_after=40)
    async with live_server(sim.app()) as sim_url:
        store, client, poller = await _poller_parts(tmp_path, sim_url)
        poller.apis["reducto"] = AzureJobAPI(
            source="reducto", provider=get_provider("azure-docintel"), base_url=sim_url,
            api_key=Secret(API_KEY), client=client, limiter=RateLimiter(600))  # fmt: skip
        try:
            sim.operations["r1"] = Operation("r1", "prebuilt-read", "2024-11-30", sim.clock(),
                                             "", 1, corrupt=False)  # fmt: skip
            await _track_ingestor(poller.ingestor, "reducto", "prebuilt-read:r1")
            await poller.poll_job(await store.get_job("reducto", "prebuilt-read:r1"))
            # max_delay is far shorter than 40 s: only the answer's Retry-After holds it back.
            assert await store.due_polls("reducto", time.time() + 39, 10) == []
            assert len(await store.due_polls("reducto", time.time() + 41, 10)) == 1
        finally:
            await client.aclose()
            await store.close()
