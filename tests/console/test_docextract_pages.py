"""Reprocess from a job's page, end to end: the DocExtract simulator, a real jobhook on loopback
and its SQLite store. The failed job's page offers the action; the provider gets one submission;
the new job completes by webhook, and each page links to the other."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.admin.test_reprocess import (  # noqa: F401 (stack: the fixture)
    API_KEY,
    _config,
    job,
    posts,
    settled,
    stack,
)
from tests.adminsupport import AUTH
from tests.console.support import csrf_of, log_in
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette

BUTTON = '<button type="submit">Reprocess at the provider</button>'


async def test_a_failed_docextract_job_is_reprocessed_from_its_page(
    stack: tuple[Simulator, Starlette, str],  # noqa: F811
) -> None:
    sim, _, url = stack
    (failed,) = sim.create_jobs(outcome="failed", error_code="processing_timeout")
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as api:
        await settled(api, failed, "failed")
        async with httpx.AsyncClient(base_url=url) as page:
            await log_in(page)
            before = (await page.get(f"/ui/jobs/docextract/{failed}")).text
            assert BUTTON in before
            sent = await page.post(f"/ui/jobs/docextract/{failed}/reprocess",
                                   data={"csrf": csrf_of(before)})  # fmt: skip
            assert sent.status_code == 303, sent.text
            assert sent.headers["location"].endswith("?done=reprocessed")
            assert posts(sim) == 1
            new_id = (await job(api, failed))["job"]["reprocessed_as"]["job_id"]
            await settled(api, new_id, "succeeded")
            old = (await page.get(f"/ui/jobs/docextract/{failed}")).text
            new = (await page.get(f"/ui/jobs/docextract/{new_id}")).text
            # A second press submits nothing new: the link holds the first submission.
            await page.post(f"/ui/jobs/docextract/{failed}/reprocess", data={"csrf": csrf_of(old)})
    assert posts(sim) == 1
    assert "Reprocessed as" in old
    assert f"/ui/jobs/docextract/{new_id}" in old
    assert "Reprocessed from" in new
    assert f"/ui/jobs/docextract/{failed}" in new
    assert BUTTON not in new  # it succeeded: nothing to reprocess


@pytest.fixture
async def strict_stack(tmp_path: Path) -> AsyncIterator[tuple[Simulator, str]]:
    """The reprocess tests' stack with DocExtract's confidence_alert raised to 0.9."""
    port = free_port()
    sim = Simulator("docextract", api_key=API_KEY, secret=SECRET, duration=0.3,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/docextract")  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        config = _config(tmp_path, sim_url)
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace('provider = "docextract"\n',
                                       'provider = "docextract"\nconfidence_alert = 0.9\n'),
                          encoding="utf-8")  # fmt: skip
        app = create_app(load_settings(config, environ={}))
        async with live_server(app, port=port) as url:
            yield sim, url


async def test_the_overview_marks_a_weak_field_and_the_job_page_shows_it(
    strict_stack: tuple[Simulator, str],
) -> None:
    """The simulator extracts ``total`` at 0.62 on every fourth job, 0.91 on the others: a mean
    of 0.85 over ten jobs, under DocExtract's alert of 0.9 here over the alert rule's ten
    extractions; ``invoice_number`` (0.98) is not."""
    sim, url = strict_stack
    jobs = sim.create_jobs(10)
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as api:
        for job_id in jobs:
            await settled(api, job_id, "succeeded")
        async with asyncio.timeout(20):  # the fields are stored when the result is resolved
            while len(weak := await _weak(api)) < 2 or await _count(api, "total") < 10:
                await asyncio.sleep(0.05)
        weak_id = weak[0]
        completion = (await job(api, weak_id))["completion"]
        async with httpx.AsyncClient(base_url=url) as page:
            await log_in(page)
            overview = (await page.get("/ui/overview")).text
            detail = (await page.get(f"/ui/jobs/docextract/{weak_id}")).text
    rows = re.findall(r"<tr[^>]*>.*?</tr>", overview, re.DOTALL)
    row = next(r for r in rows if ">total</a>" in r)
    assert row.startswith('<tr class="weak">')
    assert "alert: mean under 0.90" in row
    assert '<td class="num low">0.62' in row  # its p10 is marked too
    strong = next(r for r in rows if ">invoice_number</a>" in r)
    assert 'class="weak"' not in strong
    assert "total" in detail
    assert "0.62" in detail
    # The resolving attempt (a GET of the job, then the result in its answer) was timed.
    assert completion["resolved_at"] is not None
    assert 0 <= completion["resolve_seconds"] < 20
    assert f"in {completion['resolve_seconds']:.3f} s" in detail


async def _count(api: httpx.AsyncClient, field: str) -> int:
    stats = (await api.get("/jobs/stats")).json()
    return sum(f["count"] for f in stats["fields"] if f["field"] == field)


async def _weak(api: httpx.AsyncClient) -> list[str]:
    found = await api.get("/jobs", params={"field": "total", "max_confidence": 0.8})
    return [j["job_id"] for j in found.json()["jobs"]]
