"""Job metrics on the real app: each job counted once when it finishes, its processing time
observed once, error codes as labels and bounded; duplicates, resends and replays count nothing."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.ops.quality import JOBHOOK_CODES, MAX_PROVIDER_CODES, QualityMetrics
from receiver.pipeline import failures
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.ops.test_metrics import scrape, value
from tests.support import live_server, reducto_body, signed_headers
from tests.test_pipeline import API_KEY, pipeline_settings

if TYPE_CHECKING:
    from pathlib import Path

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
