"""SSRF through the whole pipeline: a provider whose job API hands out result URLs aimed at
internal addresses. Nothing is requested there; the completion is delivered with the refusal.

The URL policy itself (each address class, numeric spellings, DNS rebinding, redirects to a
refused address or host) is tested piece by piece in tests/pipeline/test_urlsafety.py and
tests/pipeline/test_fetch.py; these tests prove the pipeline puts every result URL through it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import SECRET, live_server, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.requests import Request

    from receiver.config.settings import Settings

API_KEY = "hostile-provider-key-77"


class HostileProvider:
    """A job API (generic provider) whose finished jobs point their result at ``result_url``."""

    def __init__(self) -> None:
        self.result_url = ""
        self.blob_requests: list[str] = []
        self.app = Starlette(routes=[
            Route("/v1/jobs/{job_id}", self.job, methods=["GET"]),
            Route("/blob", self.blob, methods=["GET"]),
        ])  # fmt: skip

    async def job(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "done", "result_url": self.result_url})

    async def blob(self, request: Request) -> Response:
        self.blob_requests.append(str(request.url))
        return Response(b'{"secret": "internal"}', media_type="application/json")


def _generic_settings(tmp_path: Path, api: str, allowed: str) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["{allowed}"]
allow_http = true
allow_private_networks = false
max_attempts = 2
[sources.acme]
provider = "generic"
secrets = ["{SECRET}"]
api_base_url = "{api}"
api_key = "{API_KEY}"
[sources.acme.poll]
grace_seconds = 3600
[sources.acme.generic]
webhook_job_id = "/job_id"
webhook_status = "/status"
job_status = "/status"
result_url = "/result_url"
status_words = {{ done = "succeeded", running = "running" }}
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.05
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def _deliver(url: str, source: str, body: bytes) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/webhooks/{source}", content=body, headers=signed_headers(body)
        )
    assert response.status_code == 200, response.text


async def _document(out: Path, source: str, job_id: str) -> dict[str, Any]:
    path = out / source / f"{job_id}.json"
    async with asyncio.timeout(30):
        while not path.exists():
            await asyncio.sleep(0.05)
    document: dict[str, Any] = json.loads(path.read_text())
    return document


@pytest.mark.parametrize(
    ("url", "allowed", "refusal"),
    [
        ("http://169.254.169.254/latest/meta-data/iam/", "169.254.169.254", "cloud metadata"),
        ("http://[::1]:{port}/blob", "::1", "loopback"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254", "unique-local"),
        ("http://[fc00::5]/blob", "fc00::5", "unique-local"),
        ("http://localhost:{port}/blob", "localhost", "'localhost' resolves to 127.0.0.1"),
        ("http://2130706433:{port}/blob", "2130706433", "non-canonical"),
        ("http://0177.0.0.1:{port}/blob", "0177.0.0.1", "Invalid IPv4 address"),
        ("http://0x7f.1:{port}/blob", "0x7f.1", "non-canonical"),
        ("http://10.0.0.8/blob", "10.0.0.8", "private"),
        ("file:///etc/passwd", "localhost", "scheme"),
    ],
    ids=["metadata", "ipv6-loopback", "aws-ipv6-metadata", "fc00", "dns-to-loopback",
         "decimal", "octal", "hex", "rfc1918", "file-scheme"],
)  # fmt: skip
async def test_a_result_url_aimed_inside_is_never_requested(
    tmp_path: Path, url: str, allowed: str, refusal: str
) -> None:
    provider = HostileProvider()
    async with live_server(provider.app) as api:
        port = api.rsplit(":", 1)[1]
        provider.result_url = url.format(port=port)
        settings = _generic_settings(tmp_path, api, allowed)
        async with live_server(create_app(settings)) as receiver:
            body = json.dumps({"job_id": "job-ssrf", "status": "done"}).encode()
            await _deliver(receiver, "acme", body)
            document = await _document(tmp_path / "out", "acme", "job-ssrf")
    assert document["result"] is None
    assert refusal in document["error"]
    assert provider.blob_requests == []
    assert not (tmp_path / "data" / "results" / "acme" / "job-ssrf.result").exists()


async def test_the_simulator_reached_by_a_name_of_loopback_serves_no_result(
    tmp_path: Path,
) -> None:
    """The simulator presigns URLs on the host it was asked by: ``localhost``, a private name."""
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=4096)
    async with live_server(build_app(sim)) as sim_url:
        api = sim_url.replace("127.0.0.1", "localhost")
        config = tmp_path / "jobhook.toml"
        config.write_text(
            f"""
data_dir = "{tmp_path / "data"}"
[results]
allowed_hosts = ["localhost"]
allow_http = true
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "{api}"
api_key = "{API_KEY}"
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""",
            encoding="utf-8",
        )
        settings = load_settings(config, environ={})
        (job_id,) = sim.create_jobs(1, result="url")
        async with live_server(create_app(settings)) as receiver:
            body = json.dumps({"status": "Completed", "job_id": job_id, "metadata": {}}).encode()
            await _deliver(receiver, "reducto", body)
            document = await _document(tmp_path / "out", "reducto", job_id)
    assert document["result"] is None
    assert "loopback" in document["error"]
    assert [e for e in sim.log if e.path.startswith("/blobs/")] == []
    assert [e.path for e in sim.log] == [f"/job/{job_id}"]  # the job API answered; no blob
