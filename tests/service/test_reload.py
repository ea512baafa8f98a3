"""Reloading a running app's secrets: the job API's key, the signing secrets and the path tokens
and header values of unsigned callbacks, and what a reload refuses."""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.service.reload import Reloader, restart_needed
from receiver.sim import Simulator, build_app
from tests.support import OLD_SECRET, SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.requests import Request


def _write(tmp_path: Path, api_url: str, *, handler_dir: str = "out") -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "{api_url}"
api_key = "file:{tmp_path / "api-key"}"
[sources.reducto.poll]
grace_seconds = 3600
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / handler_dir}"
""",
        encoding="utf-8",
    )
    return config


async def test_a_rotated_api_key_file_is_sent_from_the_next_job_api_call(tmp_path: Path) -> None:
    seen: list[str | None] = []

    async def job(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization"))
        return JSONResponse({"job_id": "j1", "status": "Pending"})

    api = Starlette(routes=[Route("/job/{job_id}", job)])
    (tmp_path / "api-key").write_text("key-before-rotation\n", encoding="utf-8")
    async with live_server(api) as api_url:
        config = _write(tmp_path, api_url)
        app = create_app(load_settings(config, environ={}))
        async with live_server(app):
            reloader = Reloader(app, config)
            jobs = app.state.runtime.apis["reducto"]
            await jobs.get_job("j1")
            (tmp_path / "api-key").write_text("key-after-rotation\n", encoding="utf-8")
            assert await reloader.reload("test")
            await jobs.get_job("j1")
    assert seen == ["Bearer key-before-rotation", "Bearer key-after-rotation"]


async def test_a_changed_handler_or_source_needs_a_restart(tmp_path: Path) -> None:
    (tmp_path / "api-key").write_text("key\n", encoding="utf-8")
    old = load_settings(_write(tmp_path, "http://127.0.0.1:9"), environ={})
    moved = load_settings(_write(tmp_path, "http://127.0.0.1:9", handler_dir="x"), environ={})
    other_api = load_settings(_write(tmp_path, "http://127.0.0.1:10"), environ={})
    assert restart_needed(old, old) == []
    assert restart_needed(old, moved) == ["handlers"]
    assert restart_needed(old, other_api) == ["sources.reducto.api_base_url"]


def _write_hinted(tmp_path: Path, sim_url: str) -> Path:
    """A signed source beside a Docling source whose hints carry a header or a path token,
    every secret of both in a file."""
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["file:{tmp_path / "secret"}"]
[sources.docling]
provider = "docling"
webhook_mode = "direct"
direct_header = "X-Jobhook-Token"
direct_header_values = ["file:{tmp_path / "header-value"}"]
direct_tokens = ["file:{tmp_path / "token"}"]
api_base_url = "{sim_url}"
api_key = "docling-sim-key"
[sources.docling.poll]
enabled = false
""",
        encoding="utf-8",
    )
    return config


async def test_rotated_hint_values_and_signing_secrets_apply_beside_header_hints(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With a source taking hints by header, ``/webhooks/{source}`` is served by the hint
    router around the webhook endpoint: a reload reaches both the signed sources' secrets and
    the hint values, and the old ones stop working at once."""
    for name in ("httpx", "uvicorn.access"):  # they log URLs, the path token among them
        caplog.set_level(logging.WARNING, logger=name)
    old_value, new_value = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    old_token, new_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    (tmp_path / "secret").write_text(OLD_SECRET, encoding="utf-8")
    (tmp_path / "header-value").write_text(old_value, encoding="utf-8")
    (tmp_path / "token").write_text(old_token, encoding="utf-8")
    sim = Simulator("docling", api_key="docling-sim-key", duration=60.0)
    task_ids = sim.create_jobs(6)

    async def attempts(url: str) -> list[int]:
        hint = {"task_id": task_ids.pop(), "progress": {"kind": "document_completed"}}
        async with httpx.AsyncClient(base_url=url) as client:
            answers = [
                await client.post("/webhooks/docling", json=hint,
                                  headers={"X-Jobhook-Token": value})
                for value in (old_value, new_value)
            ] + [
                await client.post(f"/webhooks/docling/{token}", json=hint)
                for token in (old_token, new_token)
            ] + [
                await client.post("/webhooks/reducto", content=body,
                                  headers=signed_headers(body, secret=secret, msg_id=msg))
                for secret, msg in ((OLD_SECRET, f"msg_o{len(task_ids)}"),
                                    (SECRET, f"msg_n{len(task_ids)}"))
                for body in [reducto_body(f"job-{len(task_ids)}")]
            ]  # fmt: skip
        return [answer.status_code for answer in answers]

    async with live_server(build_app(sim)) as sim_url:
        config = _write_hinted(tmp_path, sim_url)
        app = create_app(load_settings(config, environ={}))
        async with live_server(app) as url:
            reloader = Reloader(app, config)
            before = await attempts(url)
            (tmp_path / "secret").write_text(SECRET, encoding="utf-8")
            (tmp_path / "header-value").write_text(new_value, encoding="utf-8")
            (tmp_path / "token").write_text(new_token, encoding="utf-8")
            assert await reloader.reload("test")
            after = await attempts(url)
    assert before == [202, 401, 202, 404, 200, 401]
    assert after == [401, 202, 404, 202, 401, 200]
    assert old_value not in caplog.text
    assert new_value not in caplog.text
