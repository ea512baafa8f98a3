"""``kill -9`` between the webhook's 2xx and the handler's completion loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support import SECRET, free_port, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path


class HangingDownstream:
    """Holds the first delivery open forever (the service dies meanwhile); accepts the rest."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.first_arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.received.append(await request.json())
        if len(self.received) == 1:
            self.first_arrived.set()
            await self.release.wait()
        return JSONResponse({"ok": True})


def _start(config: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "receiver", "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "JOBHOOK_LOG__FORMAT": "json"},
    )


async def _wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(20):
        while True:
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)


def _config(tmp_path: Path, target: str, *, lease: float, grace: float = 10) -> Path:
    """A service config whose one handler POSTs to ``target`` and may wait there for long."""
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
shutdown_grace_seconds = {grace}
[dispatch]
lease_seconds = {lease}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "forward"
type = "http"
url = "{target}/hook"
timeout = 600
"""
    )
    return config


async def _deliver_and_wait_for_handler(
    url: str, job_id: str, downstream: HangingDownstream
) -> None:
    await _wait_ready(url)
    body = reducto_body(job_id)
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/webhooks/reducto", content=body, headers=signed_headers(body)
        )
    assert response.json()["status"] == "accepted"
    async with asyncio.timeout(10):
        await downstream.first_arrived.wait()


async def test_kill_9_after_the_2xx_still_delivers_after_restart(tmp_path: Path) -> None:
    downstream = HangingDownstream()
    async with live_server(downstream.app) as target:
        config = _config(tmp_path, target, lease=1.5)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        service = _start(config, port)
        try:
            await _deliver_and_wait_for_handler(url, "job-crash", downstream)
            service.send_signal(signal.SIGKILL)
            service.wait(timeout=10)
            service = _start(config, port)
            await _wait_ready(url)
            async with asyncio.timeout(20):
                while len(downstream.received) < 2:
                    await asyncio.sleep(0.05)
        finally:
            downstream.release.set()
            service.kill()
            service.wait(timeout=10)
    assert [r["job_id"] for r in downstream.received] == ["job-crash", "job-crash"]


async def test_sigterm_stops_within_the_grace_and_releases_claimed_work(tmp_path: Path) -> None:
    import sqlite3
    import time

    downstream = HangingDownstream()
    async with live_server(downstream.app) as target:
        config = _config(tmp_path, target, lease=600, grace=1)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        service = _start(config, port)
        try:
            await _deliver_and_wait_for_handler(url, "job-term", downstream)
            started = time.monotonic()
            service.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(service.wait, 15)
            elapsed = time.monotonic() - started
        finally:
            downstream.release.set()
            if service.poll() is None:
                service.kill()
                service.wait(timeout=10)
    assert code == 0, "a clean stop by SIGTERM exits 0"
    assert elapsed < 8, f"shutdown took {elapsed:.1f}s with a 1s grace"
    with sqlite3.connect(tmp_path / "data" / "jobhook.db") as db:
        state, owner = db.execute("SELECT state, lease_owner FROM dispatches").fetchone()
    assert (state, owner) == ("pending", None), "the claim was not released for another worker"
