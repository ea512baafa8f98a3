"""Docling Serve: its callbacks taken as hints (header or path token), its status API the truth,
its single-use result fetched once; client code as its docs write it, against the simulator."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.models import State
from receiver.providers import get_provider
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from receiver.sim.clock import ManualClock
from receiver.sim.shapes.docling import RESULT_REMOVAL
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "docling-sim-key"
ADMIN = "admin-token-d0c11n9"
HEADER_VALUE, OLD_VALUE = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
TOKEN = secrets.token_urlsafe(32)


@pytest.fixture(autouse=True)
def quiet_url_logs(caplog: pytest.LogCaptureFixture) -> None:
    """URLs holding the path token are logged by httpx and uvicorn's access log."""
    for name in ("httpx", "uvicorn.access"):
        caplog.set_level(logging.WARNING, logger=name)


def _config(tmp_path: Path, sim_url: str, auth: str | None = None) -> str:
    auth = auth if auth is not None else (
        f'direct_header = "X-Jobhook-Token"\n'
        f'direct_header_values = ["{HEADER_VALUE}", "{OLD_VALUE}"]\n'
        f'direct_tokens = ["{TOKEN}"]'
    )  # fmt: skip
    return f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{ADMIN}"
[results]
dir = "{tmp_path / "results"}"
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.docling]
provider = "docling"
webhook_mode = "direct"
{auth}
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.docling.poll]
enabled = false
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
"""


def _settings(tmp_path: Path, sim_url: str, auth: str | None = None) -> Settings:
    path = tmp_path / "jobhook.toml"
    path.write_text(_config(tmp_path, sim_url, auth), encoding="utf-8")
    return load_settings(path, environ={})


async def _submit(sim_url: str, callback: str, headers: dict[str, str]) -> str:
    """What a pipeline does: submit to Docling Serve with a callback, as its API documents."""
    request = {
        "sources": [{"kind": "http", "url": "https://example.com/a.pdf"}],
        "options": {"to_formats": ["md"]},
        "callbacks": [{"url": callback, "headers": headers}],
    }
    async with httpx.AsyncClient(base_url=sim_url, headers={"X-Api-Key": API_KEY}) as client:
        answer = await client.post("/v1/convert/source/async", json=request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["task_status"] == "pending"
    task_id: str = answer.json()["task_id"]
    return task_id


async def _track(url: str, task_id: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        answer = await client.post(f"{url}/jobs", json={"source": "docling", "job_id": task_id})
    assert answer.status_code in (200, 201), answer.text


async def _job(url: str, task_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        answer = await client.get(f"{url}/jobs/docling/{task_id}")
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] = answer.json()["job"]
    return job


async def _until(path: Path, seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while not path.exists():
            await asyncio.sleep(0.02)


@pytest.mark.timeout(60)
async def test_a_callback_with_the_header_completes_the_job_and_the_result_is_fetched_once(
    tmp_path: Path,
) -> None:
    sim = Simulator("docling", api_key=API_KEY, duration=0.3, result_bytes=300_000)
    async with (
        live_server(build_app(sim)) as sim_url,
        live_server(create_app(_settings(tmp_path, sim_url))) as url,
    ):
        task_id = await _submit(sim_url, f"{url}/webhooks/docling", {"X-Jobhook-Token": OLD_VALUE})
        await _track(url, task_id)
        done = tmp_path / "out" / "docling" / f"{task_id}.json"
        await _until(done)
    completion = json.loads(done.read_text())
    assert (completion["state"], completion["provider_status"]) == ("succeeded", "success")
    result = (tmp_path / "out" / "docling" / f"{task_id}.result").read_bytes()
    assert json.loads(result)["status"] == "success"
    assert completion["result"]["bytes"] == len(result)
    job = sim.jobs.get(task_id)
    assert job is not None
    assert job.result_fetches == 1
    assert {d.state for d in sim.deliveries} == {"delivered"}
    assert all(a.status_code == 202 for d in sim.deliveries for a in d.attempts)


@pytest.mark.timeout(60)
async def test_a_callback_with_the_path_token_works_too(tmp_path: Path) -> None:
    sim = Simulator("docling", api_key=API_KEY, duration=0.3)
    async with (
        live_server(build_app(sim)) as sim_url,
        live_server(create_app(_settings(tmp_path, sim_url))) as url,
    ):
        task_id = await _submit(sim_url, f"{url}/webhooks/docling/{TOKEN}", {})
        done = tmp_path / "out" / "docling" / f"{task_id}.json"
        await _until(done)  # untracked: one of the rationed lookups
    assert json.loads(done.read_text())["state"] == "succeeded"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"X-Jobhook-Token": "wrong" * 8}, 401), ({"X-Other": HEADER_VALUE}, 401)],
    ids=["no-header", "wrong-value", "other-header"],
)
async def test_an_unauthenticated_callback_is_refused_and_changes_no_job(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    sim = Simulator("docling", api_key=API_KEY, duration=60.0)
    async with (
        live_server(build_app(sim)) as sim_url,
        live_server(create_app(_settings(tmp_path, sim_url))) as url,
    ):
        (task_id,) = sim.create_jobs(1)
        await _track(url, task_id)
        body = {"task_id": task_id, "progress": {"kind": "update_processed", "num_processed": 1,
                "num_succeeded": 1, "num_partially_succeeded": 0, "num_failed": 0,
                "docs": []}}  # fmt: skip
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{url}/webhooks/docling", json=body, headers=headers)
            bad_token = await client.post(f"{url}/webhooks/docling/{'x' * 43}", json=body)
        await asyncio.sleep(0.2)
        job = await _job(url, task_id)
    assert answer.status_code == status
    assert bad_token.status_code == 404
    assert job["state"] == "queued"
    assert not any("/v1/status/poll/" in e.path for e in sim.log)  # no lookup was spent


@pytest.mark.timeout(60)
async def test_a_forged_callback_for_a_running_task_leaves_it_as_the_status_api_says(
    tmp_path: Path,
) -> None:
    sim = Simulator("docling", api_key=API_KEY, duration=60.0)
    async with (
        live_server(build_app(sim)) as sim_url,
        live_server(create_app(_settings(tmp_path, sim_url))) as url,
    ):
        (task_id,) = sim.create_jobs(1)
        await _track(url, task_id)
        forged = {"task_id": task_id, "task_status": "success"}
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{url}/webhooks/docling", json=forged,
                headers={"X-Jobhook-Token": HEADER_VALUE},
            )  # fmt: skip
        async with asyncio.timeout(10):
            while not any("/v1/status/poll/" in e.path for e in sim.log):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        job = await _job(url, task_id)
    assert answer.status_code == 202
    assert job["state"] in ("queued", "running")
    assert not (tmp_path / "out" / "docling" / f"{task_id}.json").exists()


def test_docling_without_direct_mode_is_refused(tmp_path: Path) -> None:
    text = _config(tmp_path, "http://127.0.0.1:1").replace('webhook_mode = "direct"\n', "")
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="sends unsigned callbacks only"):
        load_settings(path, environ={})


@pytest.mark.parametrize(
    ("auth", "message"),
    [('direct_header = "X-Jobhook-Token"', "direct_header_values"),
     (f'direct_header = "Authorization"\ndirect_header_values = ["{HEADER_VALUE}"]',
      "a header name of your own"),
     ('direct_header = "X-T"\ndirect_header_values = ["short"]', "direct_header_values #1"),
     (f'direct_header_values = ["{HEADER_VALUE}"]', "need direct_header"),
     ("", "at least one direct_tokens entry")],
    ids=["no-values", "authorization", "short-value", "no-header", "nothing"],
)  # fmt: skip
def test_header_settings_are_checked(tmp_path: Path, auth: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(tmp_path, "http://127.0.0.1:1", auth)


def test_status_words_progress_and_partial_success_are_read_from_the_status_answer() -> None:
    docling = get_provider("docling")
    meta = {"num_docs": 5, "num_processed": 5, "num_succeeded": 3, "num_failed": 2}
    partial = docling.parse_job({"task_id": "t", "task_status": "partial_success",
                                 "task_meta": meta}, source="d", job_id="t")  # fmt: skip
    assert partial.state is State.PARTIAL
    assert partial.error == "2 of 5 documents failed"
    assert partial.result is not None
    assert (partial.result.url, partial.result.single_use) == ("/v1/result/t", True)
    failed = docling.parse_job({"task_id": "t", "task_status": "failure",
                                "error_message": "boom"}, source="d", job_id="t")  # fmt: skip
    assert (failed.state, failed.error, failed.result) == (State.FAILED, "boom", None)
    running = docling.parse_job({"task_id": "t", "task_status": "started",
                                 "task_meta": {"num_docs": 4, "num_processed": 1}},
                                source="d", job_id="t")  # fmt: skip
    assert running.state is State.RUNNING
    assert running.progress is not None
    assert (running.progress.done, running.progress.total) == (1, 4)
    assert docling.auth_headers("k") == {"X-Api-Key": "k"}
    assert docling.job_path("a/b") == "/v1/status/poll/a%2Fb"


async def test_the_simulator_serves_a_result_until_its_removal_after_the_first_fetch() -> None:
    clock = ManualClock(1_790_000_000.0)
    sim = Simulator("docling", api_key=API_KEY, duration=1.0, clock=clock)
    (task_id,) = sim.create_jobs(1)
    async with (
        live_server(build_app(sim)) as sim_url,
        httpx.AsyncClient(base_url=sim_url, headers={"X-Api-Key": API_KEY}) as client,
    ):
        early = await client.get(f"/v1/result/{task_id}")
        clock.advance(2.0)
        status = (await client.get(f"/v1/status/poll/{task_id}")).json()
        first = await client.get(f"/v1/result/{task_id}")
        clock.advance(RESULT_REMOVAL - 1)
        second = await client.get(f"/v1/result/{task_id}")
        clock.advance(2.0)
        gone = await client.get(f"/v1/result/{task_id}")
        keyless = await client.get(f"/v1/result/{task_id}", headers={"X-Api-Key": ""})
        unknown = await client.get("/v1/status/poll/no-such-task")
        bad_wait = await client.get(f"/v1/status/poll/{task_id}", params={"wait": "999"})
    assert early.status_code == 404
    assert status["task_status"] == "success"
    assert first.status_code == second.status_code == 200
    assert json.loads(first.content)["status"] == "success"
    assert gone.status_code == 404
    assert gone.json()["detail"].startswith("Task result not found.")
    assert keyless.status_code == 401
    assert (unknown.status_code, unknown.json()) == (404, {"detail": "Task not found."})
    assert bad_wait.status_code == 400
