"""A single-use result is requested once, even when ``jobhook serve`` dies mid-download."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.support import free_port, live_server
from tests.test_crash import _start, _wait_ready

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.requests import Request

API_KEY = "docling-key-5f1e"
TOKEN = secrets.token_urlsafe(32)
ADMIN = "admin-token-51n9le"
TASK = "3f2b8c1e-0d4a-4e5b-9c7d-1a2b3c4d5e6f"
SIZE = 8 * 1024 * 1024
PIECE = 64 * 1024


class SlowDocling:
    """Docling Serve's status and result routes; the result is served once, slowly."""

    def __init__(self, *, pause: float = 0.05, answer: int = 200) -> None:
        self.answer = answer
        self.result_requests = 0
        self.unauthenticated = 0
        self.streaming = asyncio.Event()
        self.pause = pause
        self.app = Starlette(
            routes=[
                Route("/v1/status/poll/{task_id}", self.status, methods=["GET"]),
                Route("/v1/result/{task_id}", self.result, methods=["GET"]),
            ]
        )

    def _authorised(self, request: Request) -> bool:
        if request.headers.get("x-api-key") == API_KEY:
            return True
        self.unauthenticated += 1
        return False

    async def status(self, request: Request) -> Response:
        if not self._authorised(request):
            return JSONResponse({"detail": None}, status_code=401)
        meta = {"num_docs": 1, "num_processed": 1, "num_succeeded": 1, "num_failed": 0}
        return JSONResponse({"task_id": request.path_params["task_id"], "task_type": "convert",
                             "task_status": "success", "task_meta": meta})  # fmt: skip

    async def result(self, request: Request) -> Response:
        if not self._authorised(request):
            return JSONResponse({"detail": None}, status_code=401)
        self.result_requests += 1
        if self.result_requests > 1 or self.answer == 404:  # spent, or removed
            detail = "Task result not found. Please wait for a completion status."
            return JSONResponse({"detail": detail}, status_code=404)
        if self.answer != 200:
            return JSONResponse({"detail": "Internal Server Error"}, status_code=self.answer)

        async def body() -> AsyncIterator[bytes]:
            yield b'{"document":{"filename":"a.pdf","md_content":"'
            for _ in range(SIZE // PIECE):
                yield b"x" * PIECE
                self.streaming.set()
                await asyncio.sleep(self.pause)
            yield b'"},"status":"success"}'

        return StreamingResponse(body(), media_type="application/json")


def _config(tmp_path: Path, docling: str) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{ADMIN}"
[results]
dir = "{tmp_path / "results"}"
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[dispatch]
lease_seconds = 1.5
[sources.docling]
provider = "docling"
webhook_mode = "direct"
direct_tokens = ["{TOKEN}"]
api_base_url = "{docling}"
api_key = "{API_KEY}"
[sources.docling.poll]
enabled = false
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
""",
        encoding="utf-8",
    )
    return config


async def _hint(url: str) -> None:
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"{url}/webhooks/docling/{TOKEN}",
            json={"task_id": TASK, "progress": {"kind": "set_num_docs", "num_docs": 1}},
        )
    assert answer.status_code == 202, answer.text


@pytest.mark.timeout(90)
async def test_a_single_use_result_is_requested_once_across_a_kill_9_mid_download(
    tmp_path: Path,
) -> None:
    docling = SlowDocling()
    partials = tmp_path / "results" / "docling"
    done = tmp_path / "out" / "docling" / f"{TASK}.json"
    async with live_server(docling.app) as docling_url:
        config = _config(tmp_path, docling_url)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        service = _start(config, port)
        try:
            await _wait_ready(url)
            await _hint(url)
            async with asyncio.timeout(20):
                await docling.streaming.wait()
                while not list(partials.glob(".*.part")):
                    await asyncio.sleep(0.02)
            service.send_signal(signal.SIGKILL)
            service.wait(timeout=10)
            assert list(partials.glob(".*.part")), "the kill left a partial download"
            service = _start(config, port)
            await _wait_ready(url)
            async with asyncio.timeout(30):
                while not done.exists():
                    await asyncio.sleep(0.05)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
                job = (await client.get(f"{url}/jobs/docling/{TASK}")).json()["job"]
        finally:
            service.kill()
            service.wait(timeout=10)
    completion = json.loads(done.read_text())
    assert docling.result_requests == 1
    assert docling.unauthenticated == 0
    assert (completion["state"], completion["provider_status"]) == ("failed", "success")
    assert "requested before" in completion["error"]
    assert job["failure"]["code"] == "result_consumed"
    assert job["failure"]["where"] == "fetch"
    assert completion["result"] is None
    assert list(partials.glob(".*.part")) == []
    assert not (partials / f"{TASK}.result").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("answer", "code"),
    [(500, "result_consumed"), (503, "result_consumed"), (404, "result_expired")],
)
async def test_a_single_use_result_whose_one_request_fails_is_not_asked_again(
    tmp_path: Path, answer: int, code: str
) -> None:
    docling = SlowDocling(answer=answer)
    done = tmp_path / "out" / "docling" / f"{TASK}.json"
    async with live_server(docling.app) as docling_url:
        settings = load_settings(_config(tmp_path, docling_url), environ={})
        async with live_server(create_app(settings)) as url:
            await _hint(url)
            async with asyncio.timeout(20):
                while not done.exists():
                    await asyncio.sleep(0.02)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
                job = (await client.get(f"{url}/jobs/docling/{TASK}")).json()["job"]
    assert docling.result_requests == 1  # a 5xx is retried for any other result
    assert json.loads(done.read_text())["state"] == "failed"
    assert job["failure"]["code"] == code
