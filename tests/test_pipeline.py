"""The completion pipeline end to end: webhook → confirm → result on disk → handlers.

The provider is the simulator (a faithful fake of Reducto's job API and blob host); the
receiver, its SQLite store and every handler target are real and on loopback.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "sim-key-123"


def pipeline_settings(
    tmp_path: Path, sim_url: str, *, allowed: str = "127.0.0.1", extra: str = ""
) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["{allowed}"]
allow_http = true
allow_private_networks = true
max_attempts = 3
[dispatch]
lease_seconds = 5
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.05
{extra}
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


@pytest.fixture
async def sim() -> AsyncIterator[tuple[Simulator, str]]:
    simulator = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=3 * 1024 * 1024)
    async with live_server(build_app(simulator)) as url:
        yield simulator, url


async def _deliver_webhook(url: str, job_id: str, msg_id: str = "msg_1") -> dict[str, Any]:
    body = reducto_body(job_id)
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=msg_id)
        )
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


async def _wait_for(path: Path, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.02)


def _blob_requests(sim: Simulator) -> list[Any]:
    return [e for e in sim.log if e.path.startswith("/blobs/")]


async def test_inline_result_reaches_the_file_handler(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")
    settings = pipeline_settings(tmp_path, sim_url)
    async with live_server(create_app(settings)) as url:
        await _deliver_webhook(url, job_id)
        await _wait_for(tmp_path / "out" / "reducto" / f"{job_id}.json")
    document = json.loads((tmp_path / "out" / "reducto" / f"{job_id}.json").read_text())
    stored = (tmp_path / "out" / "reducto" / f"{job_id}.result").read_bytes()
    assert document["state"] == "succeeded"
    assert document["result"] == {
        "sha256": hashlib.sha256(stored).hexdigest(),
        "bytes": len(stored),
    }
    async with httpx.AsyncClient() as client:
        job = (
            await client.get(
                f"{sim_url}/job/{job_id}", headers={"Authorization": f"Bearer {API_KEY}"}
            )
        ).json()
    assert json.loads(stored) == job["result"]


async def test_url_result_is_streamed_to_disk_byte_for_byte(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="url")
    settings = pipeline_settings(tmp_path, sim_url)
    async with live_server(create_app(settings)) as url:
        await _deliver_webhook(url, job_id)
        await _wait_for(tmp_path / "out" / "reducto" / f"{job_id}.json")
    stored = (tmp_path / "out" / "reducto" / f"{job_id}.result").read_bytes()
    async with httpx.AsyncClient() as client:
        job = (
            await client.get(
                f"{sim_url}/job/{job_id}", headers={"Authorization": f"Bearer {API_KEY}"}
            )
        ).json()
        source = (await client.get(job["result"]["result"]["url"])).content
    assert len(stored) == 3 * 1024 * 1024
    assert stored == source


async def test_expired_url_is_refreshed_through_the_job_api(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="url")
    simulator.inject(target="blobs", status=403, count=1)  # the first URL answers "expired"
    settings = pipeline_settings(tmp_path, sim_url)
    async with live_server(create_app(settings)) as url:
        await _deliver_webhook(url, job_id)
        await _wait_for(tmp_path / "out" / "reducto" / f"{job_id}.json")
    document = json.loads((tmp_path / "out" / "reducto" / f"{job_id}.json").read_text())
    assert document["result"]["bytes"] == 3 * 1024 * 1024
    job_gets = [e for e in simulator.log if e.path == f"/job/{job_id}"]
    assert len(job_gets) == 2  # the confirmation, then one refresh for a new URL
    assert [e.status for e in _blob_requests(simulator)] == [403, 200]


async def test_disallowed_result_host_is_never_requested(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="url")
    settings = pipeline_settings(tmp_path, sim_url, allowed="results.example.com")
    async with live_server(create_app(settings)) as url:
        await _deliver_webhook(url, job_id)
        await _wait_for(tmp_path / "out" / "reducto" / f"{job_id}.json")
    document = json.loads((tmp_path / "out" / "reducto" / f"{job_id}.json").read_text())
    assert document["result"] is None
    assert "not allowed" in document["error"] or "allowed_hosts" in document["error"]
    assert _blob_requests(simulator) == []
    assert not (tmp_path / "out" / "reducto" / f"{job_id}.result").exists()


async def test_private_result_address_is_never_requested(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="url")
    settings = pipeline_settings(tmp_path, sim_url)
    settings = settings.model_copy(
        update={"results": settings.results.model_copy(update={"allow_private_networks": False})}
    )
    async with live_server(create_app(settings)) as url:
        await _deliver_webhook(url, job_id)
        await _wait_for(tmp_path / "out" / "reducto" / f"{job_id}.json")
    document = json.loads((tmp_path / "out" / "reducto" / f"{job_id}.json").read_text())
    assert document["result"] is None
    assert _blob_requests(simulator) == []


class Downstream:
    """A downstream HTTP service that fails ``failures`` times, then accepts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.received.append(body)
        if len(self.received) <= self.failures:
            return JSONResponse({"error": "down"}, status_code=503)
        return JSONResponse({"ok": True})


async def test_http_handler_that_fails_twice_gets_one_successful_post(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")
    downstream = Downstream(failures=2)
    async with live_server(downstream.app) as target:
        extra = (
            f'[[handlers]]\nname = "forward"\ntype = "http"\nurl = "{target}/hook"\n'
            "backoff_initial = 0.05\n"
        )
        settings = pipeline_settings(tmp_path, sim_url, extra=extra)
        async with live_server(create_app(settings)) as url:
            await _deliver_webhook(url, job_id)
            async with asyncio.timeout(20):
                while len(downstream.received) < 3:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
    assert len(downstream.received) == 3
    assert all(body["job_id"] == job_id for body in downstream.received)


async def test_handler_exhausting_attempts_goes_dead_and_a_resend_replays_it(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")
    downstream = Downstream(failures=2)
    async with live_server(downstream.app) as target:
        extra = (
            f'[[handlers]]\nname = "forward"\ntype = "http"\nurl = "{target}/hook"\n'
            "backoff_initial = 0.05\nmax_attempts = 2\n"
        )
        settings = pipeline_settings(tmp_path, sim_url, extra=extra)
        async with live_server(create_app(settings)) as url:
            await _deliver_webhook(url, job_id)
            async with asyncio.timeout(20):
                while True:
                    dispatches = await _dispatch_states(settings, job_id)
                    if dispatches.get("forward") == "dead":
                        break
                    await asyncio.sleep(0.05)
            assert len(downstream.received) == 2
            again = await _deliver_webhook(url, job_id)  # Svix resend: same message id
            assert again["status"] == "duplicate"
            async with asyncio.timeout(20):
                while len(downstream.received) < 3:
                    await asyncio.sleep(0.02)
            async with asyncio.timeout(5):
                while (await _dispatch_states(settings, job_id)).get("forward") != "succeeded":
                    await asyncio.sleep(0.05)


async def _dispatch_states(settings: Settings, job_id: str) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(settings.store.url.removeprefix("sqlite:///")) as db:
        rows = db.execute(
            "SELECT d.handler, d.state FROM dispatches d JOIN completions c"
            " ON c.id = d.completion_id WHERE c.job_id = ?",
            (job_id,),
        ).fetchall()
    return dict(rows)


async def test_docextract_confidence_is_kept_for_min_confidence_filters(tmp_path: Path) -> None:
    from receiver.store.rows import JobFilter

    simulator = Simulator("docextract", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(simulator)) as sim_url:
        (job_id,) = simulator.create_jobs(1)
        config = tmp_path / "de.toml"
        config.write_text(
            f'data_dir = "{tmp_path / "data"}"\n[sources.docextract]\nprovider = "docextract"\n'
            f'secrets = ["{SECRET}"]\napi_base_url = "{sim_url}"\napi_key = "{API_KEY}"\n'
            f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
        )
        app = create_app(load_settings(config, environ={}))
        body = json.dumps(
            {"event": "job.completed", "data": {"id": job_id, "status": "completed"}}
        ).encode()
        async with live_server(app) as url, httpx.AsyncClient() as client:
            response = await client.post(
                f"{url}/webhooks/docextract", content=body, headers=signed_headers(body)
            )
            assert response.json()["status"] == "accepted"
            await _wait_for(tmp_path / "out" / "docextract" / f"{job_id}.json")
            store = app.state.store
            confident = await store.list_jobs(JobFilter(min_confidence=0.5), limit=10)
            doubtful = await store.list_jobs(JobFilter(min_confidence=0.9999), limit=10)
    result = json.loads((tmp_path / "out" / "docextract" / f"{job_id}.result").read_bytes())
    lowest = min(result["confidence"].values())
    assert 0.5 <= lowest < 0.9999, "the simulator's confidences no longer exercise the filter"
    assert [j.job.job_id for j in confident] == [job_id]
    assert confident[0].confidence == lowest
    assert doubtful == []
