"""Three real ``python -m receiver serve`` replicas on one PostgreSQL database.

A storm of one message spread over them is accepted once and delivered once per handler; a
replica killed while a handler runs leaves its work to another once the lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support import SECRET, free_port, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
STORM = 200
QUIET_SECONDS = 3.0  # how long no second delivery may come after the first


class Downstream:
    """Counts the POSTs each handler makes; with ``hold_first`` it keeps the first one open."""

    def __init__(self, *, hold_first: bool = False) -> None:
        self.received: list[tuple[str, str]] = []
        self.hold_first = hold_first
        self.first_arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.app = Starlette(routes=[Route("/hook/{name}", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.received.append((request.path_params["name"], (await request.json())["job_id"]))
        if len(self.received) == 1:
            self.first_arrived.set()
            if self.hold_first:
                await self.release.wait()
        return JSONResponse({"ok": True})

    def count(self, name: str) -> int:
        return sum(1 for handler, _ in self.received if handler == name)


def write_config(tmp_path: Path, store_url: str, target: str, *, lease: float) -> Path:
    config = tmp_path / "jobhook.toml"
    handlers = "".join(
        f'[[handlers]]\nname = "{name}"\ntype = "http"\nurl = "{target}/hook/{name}"\n'
        "timeout = 600\nbackoff_initial = 0.2\n"
        for name in ("first", "second")
    )
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[store]
url = "{store_url}"
[dispatch]
lease_seconds = {lease}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
{handlers}""",
        encoding="utf-8",
    )
    return config


@contextlib.asynccontextmanager
async def replicas(config: Path, tmp_path: Path, count: int = 3) -> AsyncIterator[list[Replica]]:
    """``count`` service processes on one config, each on its own port, ready when yielded."""
    started = [Replica(config, tmp_path / f"replica-{n}.log") for n in range(count)]
    try:
        await asyncio.gather(*(r.wait_ready() for r in started))
        yield started
    finally:
        for replica in started:
            replica.stop()


class Replica:
    """``jobhook serve`` as a process of its own; ``env`` replaces the environment it gets."""

    def __init__(self, config: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "receiver", "serve", "--config", str(config),
                 "--port", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "JOBHOOK_LOG__FORMAT": "json"} if env is None else env,
            )  # fmt: skip

    async def wait_ready(self) -> None:
        async with httpx.AsyncClient() as client, asyncio.timeout(30):
            while True:
                if self.process.poll() is not None:
                    pytest.fail(f"replica exited: {self.log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{self.url}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.05)

    def stop(self, *, graceful: bool = False) -> None:
        """SIGKILL, or with ``graceful`` SIGTERM (SIGKILL after 15 s), and wait for the exit."""
        if self.process.poll() is None:
            if graceful:
                self.process.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=15)
            if self.process.poll() is None:
                self.process.kill()
        self.process.wait(timeout=10)


async def post(client: httpx.AsyncClient, replica: Replica, n: int, job_id: str) -> str:
    """One delivery of message ``msg-<job_id>``, freshly signed (its own timestamp)."""
    body = reducto_body(job_id)
    headers = signed_headers(body, msg_id=f"msg-{job_id}", timestamp=int(time.time()) - n)
    response = await client.post(f"{replica.url}/webhooks/reducto", content=body, headers=headers)
    assert response.status_code == 200, response.text
    status: str = response.json()["status"]
    return status


async def one_row(url: str, query: str, *args: Any) -> Any:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchrow(query, *args)
    finally:
        await conn.close()


@pytest.mark.timeout(120)
async def test_a_storm_of_one_message_over_three_replicas_is_delivered_once_per_handler(
    postgres_url: str, tmp_path: Path
) -> None:
    downstream = Downstream()
    async with live_server(downstream.app) as target:
        config = write_config(tmp_path, postgres_url, target, lease=30)
        async with replicas(config, tmp_path) as running:
            limits = httpx.Limits(max_connections=STORM)
            async with httpx.AsyncClient(limits=limits, timeout=30) as client:
                started = time.monotonic()
                statuses = await asyncio.gather(
                    *(post(client, running[n % 3], n, "job-storm") for n in range(STORM))
                )
                storm_seconds = time.monotonic() - started
            async with asyncio.timeout(20):
                while downstream.count("first") < 1 or downstream.count("second") < 1:
                    await asyncio.sleep(0.05)
            await asyncio.sleep(QUIET_SECONDS)
    print(f"\n{STORM} deliveries over 3 replicas answered in {storm_seconds:.2f}s")
    assert statuses.count("accepted") == 1
    assert statuses.count("duplicate") == STORM - 1
    assert sorted(downstream.received) == [("first", "job-storm"), ("second", "job-storm")]
    counts = await one_row(
        postgres_url,
        "SELECT (SELECT count(*) FROM completions), (SELECT count(*) FROM deliveries),"
        " (SELECT count(*) FROM dispatches WHERE state = 'succeeded')",
    )
    assert tuple(counts) == (1, 1, 2)


@pytest.mark.timeout(120)
async def test_a_replica_killed_mid_delivery_leaves_the_work_to_another_after_the_lease(
    postgres_url: str, tmp_path: Path
) -> None:
    downstream = Downstream(hold_first=True)
    async with live_server(downstream.app) as target:
        config = write_config(tmp_path, postgres_url, target, lease=2)
        async with replicas(config, tmp_path) as running:
            try:
                async with httpx.AsyncClient(timeout=30) as client:
                    assert await post(client, running[0], 0, "job-kill") == "accepted"
                async with asyncio.timeout(20):
                    await downstream.first_arrived.wait()
                handler, _ = downstream.received[0]
                holder = await one_row(
                    postgres_url, "SELECT lease_owner FROM dispatches WHERE handler = $1", handler
                )
                pid = int(holder["lease_owner"].split(":")[1])
                victim = next(r for r in running if r.process.pid == pid)
                victim.process.send_signal(signal.SIGKILL)
                victim.process.wait(timeout=10)
                async with asyncio.timeout(30):
                    while downstream.count(handler) < 2:
                        await asyncio.sleep(0.05)
                await asyncio.sleep(QUIET_SECONDS)
            finally:
                downstream.release.set()
            row = await one_row(
                postgres_url,
                "SELECT state, attempts, lease_owner,"
                " (SELECT count(*) FROM dispatches WHERE state <> 'succeeded') AS unfinished"
                " FROM dispatches WHERE handler = $1",
                handler,
            )
    assert downstream.count(handler) == 2
    assert {job for _, job in downstream.received} == {"job-kill"}
    assert (row["state"], row["attempts"], row["unfinished"]) == ("succeeded", 2, 0)
