"""Job metrics on the real app: each job counted once when it finishes, its processing time
observed once, error codes as labels and bounded; duplicates, resends and replays count nothing."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.ops.quality import JOBHOOK_CODES, MAX_PROVIDER_CODES, QualityMetrics
from receiver.pipeline import failures
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.ops.test_metrics import scrape, value
from tests.support import SECRET, live_server, reducto_body, signed_headers
from tests.test_pipeline import API_KEY, pipeline_settings

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def _until_counted(client: httpx.AsyncClient, name: str, **labels: str) -> Samples:
    async with asyncio.timeout(20):
        while True:
            samples = await scrape(client)
            if value(samples, name, **labels):
                return samples
            await asyncio.sleep(0.05)


async def test_a_failed_job_counts_once_whatever_arrives_after_it(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        first = await deliver(client, "job-f", status="Failed", msg_id="m1")
        again = await deliver(client, "job-f", status="Failed", msg_id="m1")  # a duplicate
        resent = await deliver(client, "job-f", status="Failed", msg_id="m2")  # news again
        replayed = await client.post("/jobs/reducto/job-f/replay", json={"include_succeeded": True})
        # A later job read after them: once it is counted, so would they have been.
        await deliver(client, "job-ok")
        samples = await _until_counted(
            client, "jobhook_jobs_finished_total", source="reducto", outcome="succeeded"
        )
    assert [r.json()["status"] for r in (first, again, resent)] == [
        "accepted", "duplicate", "accepted"
    ]  # fmt: skip
    assert replayed.status_code == 200
    assert value(samples, "jobhook_jobs_failed_total", source="reducto",
                 code="provider_failed") == 1  # fmt: skip
    assert value(samples, "jobhook_jobs_finished_total", source="reducto", outcome="failed") == 1
    assert value(samples, "jobhook_jobs_finished_total", source="reducto", outcome="succeeded") == 1
    failed = [k for k in samples if k[0] == "jobhook_jobs_failed_total"]
    assert len(failed) == 1  # the succeeded job is no failure of any code
    assert value(samples, "jobhook_job_processing_seconds_count", source="reducto") == 2


async def test_processing_time_is_the_jobs_created_to_terminal_time(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        tracked = await client.post("/jobs", json={"source": "reducto", "job_id": "job-t"})
        assert tracked.status_code in (200, 201)
        await deliver(client, "job-t", status="Pending")
        await deliver(client, "job-t")
        samples = await _until_counted(
            client, "jobhook_job_processing_seconds_count", source="reducto"
        )
        job = (await client.get("/jobs/reducto/job-t")).json()["job"]
    assert value(samples, "jobhook_job_processing_seconds_count", source="reducto") == 1
    observed = value(samples, "jobhook_job_processing_seconds_sum", source="reducto")
    assert job["processing_seconds"] > 0
    assert observed == pytest.approx(job["processing_seconds"], abs=1e-5)
    inf = value(samples, "jobhook_job_processing_seconds_bucket", source="reducto", le="+Inf")
    assert inf == 1


@pytest.mark.timeout(60)
async def test_a_resolved_job_counts_once_with_the_providers_code(tmp_path: Path) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as sim_url:
        (job_id,) = sim.create_jobs(1, outcome="failed", error_code="TIMEOUT")
        app = create_app(pipeline_settings(tmp_path, sim_url))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
            body = reducto_body(job_id, "Failed")
            for msg_id in ("m1", "m1", "m2"):  # the webhook, its duplicate, a resend
                sent = await client.post(
                    "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=msg_id)
                )
                assert sent.status_code == 200
            samples = await _until_counted(
                client, "jobhook_jobs_failed_total", source="reducto", code="TIMEOUT"
            )
            await asyncio.sleep(0.3)  # what would count a second time has had its chance
            later = await scrape(client)
    for seen in (samples, later):
        assert value(seen, "jobhook_jobs_failed_total", source="reducto", code="TIMEOUT") == 1
        assert value(seen, "jobhook_jobs_finished_total", source="reducto", outcome="failed") == 1
        assert value(seen, "jobhook_job_processing_seconds_count", source="reducto") == 1


@pytest.mark.timeout(60)
async def test_a_job_whose_result_cannot_be_had_counts_as_unresolved(tmp_path: Path) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as sim_url:
        (job_id,) = sim.create_jobs(1, result="url")
        # The result URL's host (the simulator's) is not allowed: the fetch is refused for good.
        app = create_app(pipeline_settings(tmp_path, sim_url, allowed="results.example.com"))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
            body = reducto_body(job_id)
            await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
            samples = await _until_counted(
                client, "jobhook_jobs_finished_total", source="reducto", outcome="unresolved"
            )
    assert value(samples, "jobhook_jobs_failed_total", source="reducto", code="unsafe_url") == 1
    assert value(samples, "jobhook_jobs_finished_total", source="reducto", outcome="succeeded") == 0


def test_provider_codes_are_capped_and_jobhooks_own_always_kept() -> None:
    from prometheus_client import CollectorRegistry

    metrics = QualityMetrics(CollectorRegistry())
    provider = [f"CODE_{n}" for n in range(MAX_PROVIDER_CODES + 10)]
    labels = [metrics.code_label(code) for code in provider]
    assert labels[:MAX_PROVIDER_CODES] == provider[:MAX_PROVIDER_CODES]
    assert set(labels[MAX_PROVIDER_CODES:]) == {"other"}
    assert metrics.code_label("CODE_3") == "CODE_3"  # one already labelled keeps its label
    assert {metrics.code_label(code) for code in JOBHOOK_CODES} == JOBHOOK_CODES
    assert metrics.code_label(None) == "unknown"
    for n, code in enumerate(provider[MAX_PROVIDER_CODES:]):
        metrics.job_finished("reducto", "failed", code, float(n))
    assert metrics.failed.labels("reducto", "other")._value.get() == 10


def test_every_code_a_failed_job_can_carry_is_one_of_jobhooks_own_labels() -> None:
    """failures' docstring lists jobhook's codes: those of a job (provider, fetch) must all be
    in JOBHOOK_CODES, or they would share the provider codes' cap."""
    doc = failures.__doc__ or ""
    table: dict[str, list[str]] = {}
    where = ""
    for line in doc.splitlines():
        if line.startswith("    ") and line.strip():
            if line[4] != " ":  # a new place; deeper lines go on with the last one
                where, line = line.split()[0], line.strip()[len(line.split()[0]) :]
            table.setdefault(where, []).extend(line.split())
    codes = {re.sub(r"\W", "", w) for where in ("provider", "fetch") for w in table[where]}
    codes = {code for code in codes if "_" in code}  # the words in brackets are no codes
    assert codes, "failures' docstring no longer lists the codes"
    assert codes <= JOBHOOK_CODES


def _replica_settings(tmp_path: Path, store_url: str, sim_url: str) -> Settings:
    """Two sources on one PostgreSQL store: reducto confirms with the simulator's job API (its
    jobs are counted where they are resolved), plain has none (counted where they are stored)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[store]
url = "{store_url}"
[results]
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.plain]
provider = "reducto"
secrets = ["{SECRET}"]
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


@pytest.mark.postgres
@pytest.mark.timeout(90)
async def test_replicas_on_one_store_count_each_job_once_between_them(
    tmp_path: Path, postgres_url: str
) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as sim_url:
        failed = sim.create_jobs(4, outcome="failed", error_code="TIMEOUT")
        succeeded = sim.create_jobs(4)
        apps = [create_app(_replica_settings(tmp_path / n, postgres_url, sim_url)) for n in "ab"]
        async with (
            live_server(apps[0]) as a,
            live_server(apps[1]) as b,
            httpx.AsyncClient(base_url=a) as ca,
            httpx.AsyncClient(base_url=b) as cb,
        ):
            news = [("reducto", job_id, "failed") for job_id in failed]
            news += [("reducto", job_id, "succeeded") for job_id in succeeded]
            news += [("plain", f"p{n}", "failed" if n % 2 else "succeeded") for n in range(8)]
            sends = []
            for source, job_id, outcome in news:
                body = reducto_body(job_id, "Failed" if outcome == "failed" else "Completed")
                for msg_id in ("m1", "m1", "m2"):  # the webhook, its duplicate, a resend
                    for client in (ca, cb):  # each to both replicas
                        headers = signed_headers(body, msg_id=f"{job_id}-{msg_id}")
                        sends.append(client.post(f"/webhooks/{source}", content=body,
                                                 headers=headers))  # fmt: skip
            answers = await asyncio.gather(*sends)
            assert {r.status_code for r in answers} == {200}
            async with asyncio.timeout(60):
                while True:
                    scrapes = [await scrape(ca), await scrape(cb)]
                    counted = sum(
                        value(s, "jobhook_jobs_finished_total", source=src, outcome=o)
                        for s in scrapes for src in ("reducto", "plain")
                        for o in ("succeeded", "failed")
                    )  # fmt: skip
                    if counted >= len(news):
                        break
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # what would count a second time has had its chance
            scrapes = [await scrape(ca), await scrape(cb)]

    def total(name: str, **labels: str) -> float:
        return sum(value(s, name, **labels) for s in scrapes)

    assert total("jobhook_jobs_finished_total", source="reducto", outcome="failed") == 4
    assert total("jobhook_jobs_finished_total", source="reducto", outcome="succeeded") == 4
    assert total("jobhook_jobs_failed_total", source="reducto", code="TIMEOUT") == 4
    assert total("jobhook_jobs_finished_total", source="plain", outcome="failed") == 4
    assert total("jobhook_jobs_finished_total", source="plain", outcome="succeeded") == 4
    assert total("jobhook_jobs_failed_total", source="plain", code="provider_failed") == 4
    for source in ("reducto", "plain"):
        assert total("jobhook_job_processing_seconds_count", source=source) == 8
