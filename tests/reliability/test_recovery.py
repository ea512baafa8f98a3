"""SIGKILL in the middle of 20 deliveries: the work the dead process held starts again in
seconds, not after its leases (60 s by default) run out.

SQLite: the restarted service owns the store and takes back every claim at once. PostgreSQL:
the surviving replicas see the dead one's heartbeat go stale and take back its claims.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.reliability.service import Service
from tests.services import postgres_database
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

JOBS = [f"job-{n:02d}" for n in range(20)]


class Downstream:
    """Holds the first ``hold`` deliveries open until ``release``; answers the rest at once.
    Records when each job arrived and which jobs it answered to a live sender."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.arrivals: list[tuple[str, float]] = []
        self.answered: set[str] = set()
        self.release = asyncio.Event()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        job_id = (await request.json())["job_id"]
        self.arrivals.append((job_id, time.monotonic()))
        if len(self.arrivals) <= self.hold:  # its sender dies meanwhile: never counted
            await self.release.wait()
        else:
            self.answered.add(job_id)
        return JSONResponse({"ok": True})

    def arrived_after(self, moment: float) -> dict[str, float]:
        """Each job's first arrival after ``moment``, in seconds after it."""
        first: dict[str, float] = {}
        for job_id, at in self.arrivals:
            if at >= moment:
                first.setdefault(job_id, at - moment)
        return first

    async def wait_for(self, count: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while len(self.arrivals) < count:
                await asyncio.sleep(0.02)


def _config(tmp_path: Path, name: str, target: str, store: str) -> Path:
    """A replica with the default 60 s lease and 2 s heartbeat; one slow-to-answer handler,
    which may take all 8 of the dispatcher's slots."""
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[store]
url = "{store}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "forward"
type = "http"
url = "{target}/hook"
timeout = 600
max_concurrency = 8
"""
    )
    return config


async def _send_all(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for job_id in JOBS:
            body = reducto_body(job_id)
            headers = signed_headers(body, msg_id=f"msg-{job_id}")
            response = await client.post(f"{url}/webhooks/reducto", content=body, headers=headers)
            assert response.json()["status"] == "accepted"


async def _all_answered(downstream: Downstream, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while downstream.answered != set(JOBS):
            await asyncio.sleep(0.02)


async def test_a_restarted_sqlite_service_starts_every_pending_delivery_at_once(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    downstream = Downstream(hold=8)  # the dispatcher's default concurrency: all 8 held
    async with live_server(downstream.app) as target:
        store = f"sqlite:///{tmp_path / 'data' / 'jobhook.db'}"
        service = Service(_config(tmp_path, "one", target, store), tmp_path / "one.log")
        try:
            service.start()
            await service.wait_ready()
            await _send_all(service.url)
            await downstream.wait_for(8, timeout=10)
            service.kill()
            unanswered = set(JOBS) - downstream.answered
            downstream.release.set()
            restarted = time.monotonic()
            service.start()
            ready = await service.wait_ready()
            await _all_answered(downstream, timeout=30)
        finally:
            service.close()
    starts = downstream.arrived_after(restarted)  # some start before /readyz first answers
    assert set(starts) >= unanswered
    slowest = max(starts[job] for job in unanswered) - ready
    report_figures(f"{len(unanswered)} pending at the kill; the last started {slowest:.2f}s "
                   "after the restarted service was ready")  # fmt: skip
    assert slowest < 2.0
    assert "store_claims_taken_back" in service.log_text()


@pytest.mark.postgres
@pytest.mark.timeout(120)
async def test_a_dead_replicas_claims_go_to_the_survivors_within_ten_seconds(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    downstream = Downstream(hold=8)  # the first replica's 8 claims stay open until it dies
    async with postgres_database() as store, live_server(downstream.app) as target:
        replicas = [
            Service(_config(tmp_path, name, target, store), tmp_path / f"{name}.log")
            for name in ("a", "b", "c")
        ]
        first, *survivors = replicas
        try:
            first.start()
            await first.wait_ready()
            await _send_all(first.url)
            await downstream.wait_for(8, timeout=10)
            held = {job for job, _ in downstream.arrivals}
            for replica in survivors:
                replica.start()
            for replica in survivors:
                await replica.wait_ready()
            first.kill()
            killed = time.monotonic()
            downstream.release.set()
            await _all_answered(downstream, timeout=60)
        finally:
            for replica in replicas:
                replica.close()
    starts = downstream.arrived_after(killed)
    assert set(starts) >= held
    slowest = max(starts[job] for job in held)
    report_figures(f"{len(held)} held by the killed replica; the last restarted {slowest:.2f}s "
                   "after its death")  # fmt: skip
    assert slowest < 10.0
