"""Reprocess end to end: the DocExtract simulator and a real jobhook on loopback, its real
SQLite store, the real CLI. A failed document is submitted again through the API within the
shared rate budget, the new job is tracked and completes by webhook with ``reprocessed_from``,
the old job links to it; dry runs change nothing, a second call submits nothing, a provider that
cannot resubmit answers 422, and bad bodies answer 400 without touching the provider."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.pipeline.reprocess import ATTEMPTS
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.adminsupport import AUTH, TOKEN
from tests.cli.test_jobs import cli, logs_on_stderr  # noqa: F401 (autouse: logs off stdout)
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette

API_KEY = "sim-key-reprocess"
BUDGET = 300  # requests a minute: jobhook's ceiling, well under the simulator's own limit


def _config(tmp_path: Path, sim_url: str) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
[sources.docextract]
provider = "docextract"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.docextract.poll]
requests_per_minute = {BUDGET}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""", encoding="utf-8")  # fmt: skip
    return config


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[Simulator, Starlette, str]]:
    port = free_port()
    sim = Simulator("docextract", api_key=API_KEY, secret=SECRET, duration=0.3,
                    requests_per_minute=6000,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/docextract")  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(load_settings(_config(tmp_path, sim_url), environ={}))
        async with live_server(app, port=port) as url:
            yield sim, app, url


def posts(sim: Simulator) -> int:
    """Submissions the simulator received."""
    return sum(1 for e in sim.log.entries() if (e.method, e.path) == ("POST", "/v1/documents"))


async def job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/jobs/docextract/{job_id}")
    assert response.status_code == 200, response.text
    detail: dict[str, Any] = response.json()
    return detail


async def settled(client: httpx.AsyncClient, job_id: str, state: str) -> dict[str, Any]:
    """The job once in ``state`` and, when failed, confirmed (its error code known)."""
    async with asyncio.timeout(20):
        while True:
            response = await client.get(f"/jobs/docextract/{job_id}")
            found = response.json()["job"] if response.status_code == 200 else {}
            if found.get("state") == state and (state != "failed" or found["error_code"]):
                return await job(client, job_id)
            await asyncio.sleep(0.05)


async def reprocess(client: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await client.post("/jobs/reprocess", json=body, timeout=60)


async def test_a_failed_docextract_job_is_reprocessed_once_and_its_new_job_completes(
    stack: tuple[Simulator, Starlette, str],
) -> None:
    sim, app, url = stack
    (transient,) = sim.create_jobs(outcome="failed", error_code="processing_timeout",
                                   metadata={"order": "7"})  # fmt: skip
    (broken,) = sim.create_jobs(outcome="failed", error_code="extraction_failed")
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        for job_id in (transient, broken):
            await settled(client, job_id, "failed")  # the simulator's failed webhooks
        await client.post("/jobs", json={"source": "docextract", "job_id": transient,
                                         "metadata": {"order": "7"}})  # fmt: skip

        dry = await reprocess(client, {"source": "docextract", "state": "failed", "dry_run": True})
        assert dry.status_code == 200, dry.text
        assert dry.json() == {"dry_run": True, "count": 2, "already_reprocessed": 0,
                              "not_reprocessable": 0, "reasons": {}}  # fmt: skip
        assert posts(sim) == 0
        assert (await job(client, transient))["job"]["reprocessed_as"] is None

        first = await reprocess(client, {"source": "docextract", "state": "failed",
                                         "error_code": "processing_timeout"})  # fmt: skip
        assert first.status_code == 200, first.text
        answer = first.json()
        assert (answer["submitted"], answer["failed"], answer["next_cursor"]) == (1, 0, None)
        new_id = answer["jobs"][0]["new_job_id"]
        assert posts(sim) == 1
        # The shared budget: the reprocess went through the poller's own JobAPI and limiter.
        api = app.state.runtime.apis["docextract"]
        assert app.state.runtime.reprocessor.apis["docextract"] is api
        assert api.calls["201"] == 1  # the submission was counted by the shared JobAPI

        done = await settled(client, new_id, "succeeded")
        assert done["job"]["metadata"] == {
            "order": "7",
            "reprocessed_from": {"source": "docextract", "job_id": transient},
        }
        assert done["job"]["reprocessed_from"]["job_id"] == transient
        assert [d["state"] for d in done["deliveries"]] == ["succeeded"]  # by webhook
        assert sim.job_view(new_id)["metadata"]["reprocessed_from"]["job_id"] == transient  # type: ignore[index]
        old = await job(client, transient)
        assert old["job"]["reprocessed_as"]["job_id"] == new_id
        assert old["job"]["reprocessed_as"]["state"] == "submitted"
        assert old["job"]["state"] == "failed"  # the old job stays as it was

        again = await reprocess(client, {"source": "docextract", "state": "failed",
                                         "error_code": "processing_timeout"})  # fmt: skip
        assert (again.json()["submitted"], again.json()["already_reprocessed"]) == (0, 1)
        one = await client.post(f"/jobs/docextract/{transient}/reprocess")
        assert one.json() == {"source": "docextract", "job_id": transient,
                              "status": "already_reprocessed", "new_job_id": new_id,
                              "detail": "submitted"}  # fmt: skip
        assert posts(sim) == 1

        # The console's one-job form; a document whose failure is its own fails again.
        single = await client.post(f"/jobs/docextract/{broken}/reprocess")
        assert single.status_code == 200, single.text
        repeat = await settled(client, single.json()["new_job_id"], "failed")
        assert repeat["job"]["error_code"] == "extraction_failed"
        forced = await client.post(f"/jobs/docextract/{transient}/reprocess",
                                   json={"force": True})  # fmt: skip
        assert forced.json()["status"] == "submitted"
        assert posts(sim) == 3

        shown = await cli("jobs", "show", "docextract", transient, url=url)
        assert shown.exit_code == 0, shown.output
        assert f"docextract/{forced.json()['new_job_id']}" in shown.stdout
    budget_respected(sim)


def budget_respected(sim: Simulator) -> None:
    """No sliding second held more API requests than the budget allows (one of slack)."""
    times = sorted(e.t for e in sim.log.entries() if not e.path.startswith(("/_sim", "/blobs")))
    most = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert most <= BUDGET / 60 + 1
    assert all(e.reason != "rate_limited" for e in sim.log.entries())


async def test_a_provider_that_cannot_resubmit_answers_422(
    stack: tuple[Simulator, Starlette, str],
) -> None:
    sim, _, url = stack
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        await client.post("/jobs", json={"source": "reducto", "job_id": "r-1"})
        one = await client.post("/jobs/reducto/r-1/reprocess")
        bulk = await reprocess(client, {"source": "reducto", "dry_run": True})
    for response in (one, bulk):
        assert response.status_code == 422
        assert response.json()["error"] == "not_reprocessable"
        assert "reducto" in response.json()["detail"]
        assert "document input" in response.json()["detail"]
    assert posts(sim) == 0


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [({"ids": ["x"]}, 400, "invalid_body"),
     ({"bogus": 1}, 400, "invalid_body"),
     ({"state": "exploded"}, 400, "invalid_query"),
     ({"limit": 0}, 400, "invalid_body"),
     ({"source": "docextract", "cursor": "not-ours"}, 400, "invalid_query"),
     ({"source": "nowhere"}, 404, "unknown_source")],
)  # fmt: skip
async def test_bad_bodies_are_refused_and_nothing_is_submitted(
    stack: tuple[Simulator, Starlette, str], body: dict[str, Any], status: int, error: str
) -> None:
    sim, app, url = stack
    (failed,) = sim.create_jobs(outcome="failed", duration=0)
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        await settled(client, failed, "failed")
        response = await reprocess(client, body)
        unknown = await client.post("/jobs/docextract/nope/reprocess")
        not_json = await client.post("/jobs/docextract/nope/reprocess", content=b"{")
    assert (response.status_code, response.json()["error"]) == (status, error)
    assert unknown.status_code == 404
    assert not_json.status_code == 400
    assert posts(sim) == 0
    assert await app.state.store.reprocess_of("docextract", failed) is None


async def test_the_cli_counts_then_reprocesses_with_progress(
    stack: tuple[Simulator, Starlette, str],
) -> None:
    sim, _, url = stack
    failed = sim.create_jobs(3, outcome="failed", error_code="processing_timeout")
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        for job_id in failed:
            await settled(client, job_id, "failed")
    dry = await cli("jobs", "reprocess", "--source", "docextract", "--since", "1h",
                    "--dry-run", url=url)  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert "would submit 3" in dry.stdout
    assert posts(sim) == 0
    run = await cli("jobs", "reprocess", "--source", "docextract", "--state", "failed",
                    "--error-code", "processing_timeout", "--json", url=url)  # fmt: skip
    assert run.exit_code == 0, run.output
    answer = json.loads(run.stdout)
    assert answer["submitted"] == 3, answer
    assert posts(sim) == 3
    again = await cli("jobs", "reprocess", "--source", "docextract", url=url)
    assert again.exit_code == 0, again.output
    assert "submitted 0, already reprocessed 3" in again.stdout
    one = await cli("jobs", "reprocess", "docextract", failed[0], url=url)
    assert "already reprocessed" in one.stdout
    refused = await cli("jobs", "reprocess", "--source", "reducto", url=url)
    assert refused.exit_code == 4
    assert "reducto" in refused.stderr
    assert posts(sim) == 3


async def test_a_failing_provider_stops_the_call_and_nothing_is_lost(
    stack: tuple[Simulator, Starlette, str],
) -> None:
    sim, app, url = stack
    failed = sim.create_jobs(4, outcome="failed", error_code="processing_timeout")
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        for job_id in failed:
            await settled(client, job_id, "failed")
        sim.inject(status=503, retry_after=0, count=3 * ATTEMPTS)
        down = (await reprocess(client, {"source": "docextract"})).json()
        assert (down["submitted"], down["failed"]) == (0, 4)
        details = sorted(job["detail"] for job in down["jobs"])
        assert sum("answered 503" in d for d in details) == 3
        assert sum(d.startswith("not sent") for d in details) == 1
        assert posts(sim) == 0
        back = (await reprocess(client, {"source": "docextract"})).json()
    assert (back["submitted"], back["failed"]) == (4, 0)
    assert posts(sim) == 4
    for job_id in failed:
        link = await app.state.store.reprocess_of("docextract", job_id)
        assert link.state == "submitted"
