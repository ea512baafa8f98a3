"""LlamaParse offline, end to end: the official ``llama-cloud`` SDK submits parse jobs to the
simulator with webhook configurations pointing at a real jobhook on loopback; jobhook takes the
signed (``LC-Signature``) or header-authenticated deliveries as hints, or polls, asks the status
API, streams the result and hands it to a ``file`` handler (state, error code, result)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from llama_cloud import LlamaCloud

from receiver.config.load import load_settings
from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.sim.llamaparse import LlamaParseSim
from tests.adminsupport import AUTH, TOKEN
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

KEY = "llamaparse-sim-key-0123456789"
SIGNING = secrets.token_urlsafe(32)
HEADER_VALUE = secrets.token_urlsafe(32)
SIGNED = f'signature = "llamacloud"\nsecrets = ["{SIGNING}"]\n'
HEADER = (
    'webhook_mode = "direct"\ndirect_header = "X-Jobhook-Token"\n'
    f'direct_header_values = ["{HEADER_VALUE}"]\n'
)
FINAL_EVENTS = ["parse.success", "parse.partial_success", "parse.error", "parse.cancelled"]


@pytest.fixture(autouse=True)
def quiet_url_logs(caplog: pytest.LogCaptureFixture) -> None:
    for name in ("httpx", "uvicorn.access"):
        caplog.set_level(logging.WARNING, logger=name)


def _settings(tmp_path: Path, sim_url: str, auth: str, *, poll: bool) -> Settings:
    polling = (
        "initial_delay = 0.2\nmax_delay = 1.0\ngrace_seconds = 0\n"
        if poll
        else ("enabled = false\n")
    )
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        '[results]\nallowed_hosts = ["127.0.0.1"]\nallow_http = true\n'
        "allow_private_networks = true\n"
        f'[sources.llamaparse]\nprovider = "llamaparse"\n{auth}'
        f'api_base_url = "{sim_url}"\napi_key = "env:LLAMA_CLOUD_API_KEY"\n'
        f"[sources.llamaparse.poll]\nrequests_per_minute = 600\n{polling}"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return load_settings(config, environ={"LLAMA_CLOUD_API_KEY": KEY})


def _submit(sim_url: str, name: str, hooks: list[dict[str, Any]], *, upload: bool = False) -> str:
    """What a pipeline does: parse a document with the SDK, webhooks configured per job."""
    client = LlamaCloud(api_key=KEY, base_url=sim_url)
    with client:
        if upload:
            job = client.parsing.create(tier="fast", version="latest",
                                        upload_file=(name, b"%PDF-1.7\n%%EOF\n"),
                                        webhook_configurations=hooks)  # fmt: skip
        else:
            job = client.parsing.create(tier="agentic", version="latest",
                                        source_url=f"https://docs.example/{name}",
                                        webhook_configurations=hooks)  # fmt: skip
    assert job.status == "PENDING"
    return job.id


async def _delivered(out: Path, job_ids: list[str], seconds: float = 20.0) -> dict[str, Any]:
    async with asyncio.timeout(seconds):
        while True:
            files = [out / f"{safe_name(job_id)}.json" for job_id in job_ids]
            if all(f.exists() for f in files):
                return {j: json.loads(f.read_text()) for j, f in zip(job_ids, files, strict=True)}
            await asyncio.sleep(0.05)


async def _jobs(url: str, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as admin:
        return {j: (await admin.get(f"/jobs/llamaparse/{j}")).json()["job"] for j in job_ids}


async def _track(url: str, job_ids: list[str]) -> None:
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as admin:
        for job_id in job_ids:
            answer = await admin.post("/jobs", json={"source": "llamaparse", "job_id": job_id})
            assert answer.status_code in (200, 201), answer.text


def _result(tmp_path: Path, job_id: str) -> Any:
    return json.loads((tmp_path / "out" / "llamaparse" / f"{safe_name(job_id)}.result").read_text())


@pytest.mark.timeout(60)
async def test_signed_webhooks_complete_jobs_as_the_status_api_says(tmp_path: Path) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=0.4)
    async with live_server(sim.app()) as sim_url:
        settings = _settings(tmp_path, sim_url, SIGNED, poll=False)
        async with live_server(create_app(settings)) as url:
            hooks = [{"webhook_url": f"{url}/webhooks/llamaparse",
                      "webhook_events": FINAL_EVENTS, "webhook_signing_secret": SIGNING,
                      "webhook_output_format": "json"}]  # fmt: skip
            whole = await asyncio.to_thread(_submit, sim_url, "report.pdf", hooks, upload=True)
            torn = await asyncio.to_thread(_submit, sim_url, "torn.pdf", hooks)
            corrupt = await asyncio.to_thread(_submit, sim_url, "corrupt.pdf", hooks)
            ids = [whole, torn, corrupt]
            files = await _delivered(tmp_path / "out" / "llamaparse", ids)
            jobs = await _jobs(url, ids)
    assert [files[j]["state"] for j in ids] == ["succeeded", "partial", "failed"]
    assert [jobs[j]["error_code"] for j in ids] == [None, "pages_failed", None]
    assert files[torn]["error"] == (
        "1 of 2 pages failed: page 2: Page could not be parsed: the page is damaged"
    )
    assert files[corrupt]["error"] == "Document could not be parsed: the file is corrupted"
    assert files[corrupt]["result"] is None
    result = _result(tmp_path, whole)
    assert result["job"]["id"] == whole
    assert result["markdown"]["pages"][0]["markdown"].startswith("# report.pdf")
    kept = _result(tmp_path, torn)  # the failed page's entry stays in the result
    assert kept["markdown"]["pages"][1] == {
        "page_number": 2, "success": False,
        "error": "Page could not be parsed: the page is damaged",
    }  # fmt: skip
    # Only the events configured were sent, each signed and accepted.
    assert sorted(s.event for s in sim.sent) == ["parse.error", "parse.partial_success",
                                                 "parse.success"]  # fmt: skip
    assert all(s.status is not None and s.status < 300 for s in sim.sent), sim.sent
    assert all(s.headers["LC-Signature"].startswith("sha256=") for s in sim.sent)
    # The status API was asked about each job (the body is never the truth).
    for job_id in ids:
        assert sim.hits_to(f"/api/v2/parse/{job_id}")


@pytest.mark.timeout(60)
async def test_unsigned_webhooks_with_the_header_are_hints_for_the_status_api(
    tmp_path: Path,
) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=0.4)
    async with live_server(sim.app()) as sim_url:
        settings = _settings(tmp_path, sim_url, HEADER, poll=False)
        async with live_server(create_app(settings)) as url:
            # No events listed (all of them), no output format (a JSON-encoded string body).
            hooks = [{"webhook_url": f"{url}/webhooks/llamaparse",
                      "webhook_headers": {"X-Jobhook-Token": HEADER_VALUE}}]  # fmt: skip
            whole = await asyncio.to_thread(_submit, sim_url, "report.pdf", hooks)
            corrupt = await asyncio.to_thread(_submit, sim_url, "corrupt.pdf", hooks)
            ids = [whole, corrupt]
            files = await _delivered(tmp_path / "out" / "llamaparse", ids)
    assert [files[j]["state"] for j in ids] == ["succeeded", "failed"]
    assert [files[j]["provider_status"] for j in ids] == ["COMPLETED", "FAILED"]
    assert _result(tmp_path, whole)["markdown"]["pages"][0]["success"] is True
    assert {s.event for s in sim.sent} >= {"parse.running", "parse.success", "parse.error"}
    assert all(json.loads(s.body).startswith("{") for s in sim.sent)  # a string body
    assert all(s.status == 202 for s in sim.sent), sim.sent
    assert all("LC-Signature" not in s.headers for s in sim.sent)


@pytest.mark.timeout(60)
async def test_polled_jobs_reach_the_file_handler_cancelled_and_expired_too(
    tmp_path: Path,
) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=0.4)
    async with live_server(sim.app()) as sim_url:
        whole = await asyncio.to_thread(_submit, sim_url, "report.pdf", [])
        torn = await asyncio.to_thread(_submit, sim_url, "torn.pdf", [])
        stopped = await asyncio.to_thread(_submit, sim_url, "stop.pdf", [])
        with LlamaCloud(api_key=KEY, base_url=sim_url) as client:
            await asyncio.to_thread(client.parsing.cancel, stopped)
        ids = [whole, torn, stopped]
        settings = _settings(tmp_path, sim_url, SIGNED, poll=True)
        async with live_server(create_app(settings)) as url:
            await _track(url, ids)
            files = await _delivered(tmp_path / "out" / "llamaparse", ids)
            jobs = await _jobs(url, ids)
    assert [files[j]["state"] for j in ids] == ["succeeded", "partial", "cancelled"]
    assert [jobs[j]["error_code"] for j in ids] == [None, "pages_failed", None]
    assert _result(tmp_path, whole)["items"]["pages"][0]["page_number"] == 1
    assert files[stopped]["result"] is None
    assert not sim.sent


@pytest.mark.timeout(60)
async def test_a_result_past_its_retention_is_result_expired(tmp_path: Path) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=0.2, retention=0.0)
    async with live_server(sim.app()) as sim_url:
        job_id = await asyncio.to_thread(_submit, sim_url, "report.pdf", [])
        await asyncio.sleep(0.4)
        settings = _settings(tmp_path, sim_url, SIGNED, poll=True)
        async with live_server(create_app(settings)) as url:
            await _track(url, [job_id])
            files = await _delivered(tmp_path / "out" / "llamaparse", [job_id])
            jobs = await _jobs(url, [job_id])
    assert (files[job_id]["state"], files[job_id]["result"]) == ("succeeded", None)
    assert jobs[job_id]["error_code"] == "result_expired"


def _sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("auth", "headers", "status"),
    [
        (SIGNED, {}, 400),
        (SIGNED, {"LC-Signature": "sha256=" + "0" * 64}, 401),
        (SIGNED, {"LC-Signature": "forged"}, 400),
        (HEADER, {}, 401),
        (HEADER, {"X-Jobhook-Token": "wrong" * 8}, 401),
    ],
    ids=[
        "signed-no-signature",
        "signed-wrong-key",
        "signed-malformed",
        "header-missing",
        "header-wrong",
    ],
)
async def test_an_unauthenticated_webhook_is_refused_and_changes_no_job(
    tmp_path: Path, auth: str, headers: dict[str, str], status: int
) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=60.0)
    async with live_server(sim.app()) as sim_url:
        job_id = await asyncio.to_thread(_submit, sim_url, "report.pdf", [])
        settings = _settings(tmp_path, sim_url, auth, poll=False)
        async with live_server(create_app(settings)) as url:
            await _track(url, [job_id])
            sim.hits.clear()
            body = json.dumps({"event_type": "parse.success", "data": {"id": job_id}}).encode()
            async with httpx.AsyncClient() as client:
                sent = {**headers, "Content-Type": "application/json"}
                answer = await client.post(f"{url}/webhooks/llamaparse", content=body,
                                           headers=sent)  # fmt: skip
            await asyncio.sleep(0.3)
            job = (await _jobs(url, [job_id]))[job_id]
    assert answer.status_code == status, answer.text
    assert job["state"] == "queued"
    assert not sim.hits_to(f"/api/v2/parse/{job_id}")  # no lookup was spent


@pytest.mark.timeout(60)
@pytest.mark.parametrize("auth", [SIGNED, HEADER], ids=["signed", "header"])
async def test_an_authenticated_but_false_success_leaves_the_job_as_the_status_api_says(
    tmp_path: Path, auth: str
) -> None:
    sim = LlamaParseSim(api_key=KEY, duration=60.0)
    async with live_server(sim.app()) as sim_url:
        job_id = await asyncio.to_thread(_submit, sim_url, "report.pdf", [])
        settings = _settings(tmp_path, sim_url, auth, poll=False)
        async with live_server(create_app(settings)) as url:
            await _track(url, [job_id])
            body = json.dumps(json.dumps({"event_type": "parse.success", "data": {"id": job_id}}))
            data = body.encode()
            headers = {"Content-Type": "application/json"}
            headers.update({"LC-Signature": _sign(data, SIGNING)} if auth == SIGNED
                           else {"X-Jobhook-Token": HEADER_VALUE})  # fmt: skip
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"{url}/webhooks/llamaparse", content=data,
                                           headers=headers)  # fmt: skip
            async with asyncio.timeout(10):
                while not sim.hits_to(f"/api/v2/parse/{job_id}"):
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.5)
            job = (await _jobs(url, [job_id]))[job_id]
    assert answer.status_code in (200, 202), answer.text
    if auth == HEADER:  # a hint: only the status API's answer is recorded
        assert job["state"] != "succeeded"
    # Signed: LlamaCloud's own word is recorded, but no handler hears of it before the status
    # API confirms it (the webhook can come before the result is readable).
    assert not (tmp_path / "out" / "llamaparse" / f"{safe_name(job_id)}.json").exists()
