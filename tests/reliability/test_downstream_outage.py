"""An ``http`` handler whose target is down: backoff, delivery after recovery, dead, replay."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.support import SECRET, free_port, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings


class Target:
    """The handler's downstream: answers ``failures`` times with 503, then 200; times each call."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.calls.append((time.monotonic(), await request.json()))
        if len(self.calls) <= self.failures:
            return JSONResponse({"error": "down"}, status_code=503)
        return JSONResponse({"ok": True})


def _settings(tmp_path: Path, target: str, *, max_attempts: int, initial: float) -> Settings:
    # The circuit stays closed here: these tests are about each delivery's own backoff
    # (tests/pipeline/test_circuit.py has the circuit).
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[dispatch]
lease_seconds = 5
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "forward"
type = "http"
url = "{target}/hook"
timeout = 2
max_attempts = {max_attempts}
backoff_initial = {initial}
backoff_max = 5
circuit_failures = 1000
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


def _dispatch(settings: Settings, job_id: str) -> tuple[str, int, str | None]:
    with contextlib.closing(sqlite3.connect(settings.store.url.removeprefix("sqlite:///"))) as db:
        row = db.execute(
            "SELECT d.state, d.attempts, d.last_error FROM dispatches d"
            " JOIN completions c ON c.id = d.completion_id WHERE c.job_id = ?",
            (job_id,),
        ).fetchone()
    return row if row is not None else ("none", 0, None)


async def _until(check: Any, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


async def _webhook(url: str, job_id: str) -> None:
    body = reducto_body(job_id)
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=job_id)
        )
    assert response.json()["status"] == "accepted"


async def test_a_target_down_for_a_while_gets_the_delivery_once_it_is_back(
    tmp_path: Path,
) -> None:
    port = free_port()  # nothing listens there yet: every attempt is refused
    settings = _settings(tmp_path, f"http://127.0.0.1:{port}", max_attempts=50, initial=0.1)
    async with live_server(create_app(settings)) as url:
        await _webhook(url, "job-outage")
        await _until(lambda: _dispatch(settings, "job-outage")[1] >= 3)
        state, _, error = _dispatch(settings, "job-outage")
        assert state in ("pending", "running")
        assert error is not None
        assert "ConnectError" in error
        target = Target()
        async with live_server(target.app, port=port):
            await _until(lambda: _dispatch(settings, "job-outage")[0] == "succeeded")
            await asyncio.sleep(0.3)
    assert [body["job_id"] for _, body in target.calls] == ["job-outage"]
    assert _dispatch(settings, "job-outage")[1] >= 4


async def test_retries_back_off_exponentially_while_the_target_fails(tmp_path: Path) -> None:
    target = Target(failures=5)
    async with live_server(target.app) as target_url:
        settings = _settings(tmp_path, target_url, max_attempts=10, initial=0.2)
        async with live_server(create_app(settings)) as url:
            await _webhook(url, "job-backoff")
            await _until(lambda: len(target.calls) == 6)
            await asyncio.sleep(0.3)
    assert len(target.calls) == 6
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(target.calls)]
    # Retry n waits between half and all of 0.2 * 2^(n-1) seconds (full jitter on the top half).
    for n, gap in enumerate(gaps[:5], start=1):
        ceiling = 0.2 * 2 ** (n - 1)
        assert gap >= ceiling / 2 * 0.95, f"retry {n} came after {gap:.3f}s, before backoff"
    assert gaps[4] > gaps[0] * 3, f"the waits did not grow: {gaps}"


@pytest.mark.timeout(60)
async def test_exhausted_attempts_go_dead_and_a_replay_delivers(tmp_path: Path) -> None:
    target = Target(failures=3)
    async with live_server(target.app) as target_url:
        settings = _settings(tmp_path, target_url, max_attempts=3, initial=0.05)
        app = create_app(settings)
        async with live_server(app) as url:
            await _webhook(url, "job-dead")
            await _until(lambda: _dispatch(settings, "job-dead")[0] == "dead")
            await asyncio.sleep(1.0)
            assert len(target.calls) == 3, "a dead dispatch was retried on its own"
            replayed = await app.state.store.replay(source="reducto", job_id="job-dead")
            app.state.runtime.dispatcher.wake()
            await _until(lambda: _dispatch(settings, "job-dead")[0] == "succeeded")
    assert replayed == 1
    assert len(target.calls) == 4
    assert all(body["job_id"] == "job-dead" for _, body in target.calls)
