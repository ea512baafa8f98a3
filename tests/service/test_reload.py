"""Reloading a running app's secrets: the job API's key, and what a reload refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.service.reload import Reloader, restart_needed
from tests.support import SECRET, live_server

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
