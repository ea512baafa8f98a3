"""Two real ``python -m receiver serve`` replicas on one PostgreSQL database, traced through
``OTEL_*`` alone: a completion received by one and delivered by the other is one trace."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver import tracing
from tests.otlp import Collector
from tests.store.test_replicas import Replica, one_row
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


class HoldFirst:
    """The http handler's target: keeps each traceparent, holds the first request open."""

    def __init__(self) -> None:
        self.traceparents: list[str] = []
        self.first = asyncio.Event()
        self.release = asyncio.Event()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.traceparents.append(request.headers["traceparent"])
        if len(self.traceparents) == 1:
            self.first.set()
            await self.release.wait()
        return JSONResponse({"ok": True})


class TracedReplica(Replica):
    """A replica exporting its spans to the test's collector, configured by OTEL_* alone."""

    def __init__(self, config: Path, log: Path, name: str, collector: str) -> None:
        self.name = name
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            JOBHOOK_LOG__FORMAT="json",
            OTEL_EXPORTER_OTLP_ENDPOINT=collector,
            OTEL_SERVICE_NAME="jobhook",
            OTEL_RESOURCE_ATTRIBUTES=f"service.instance.id={name}",
            OTEL_BSP_SCHEDULE_DELAY="50",  # export within 50 ms: a killed replica loses nothing
        )
        super().__init__(config, log, env)


@pytest.mark.timeout(120)
async def test_a_completion_received_by_one_replica_and_delivered_by_another_is_one_trace(
    postgres_url: str, tmp_path: Path
) -> None:
    collector, downstream = Collector(), HoldFirst()
    async with live_server(collector.app) as otlp, live_server(downstream.app) as target:
        config = tmp_path / "jobhook.toml"
        config.write_text(
            f"""
data_dir = "{tmp_path / "data"}"
[store]
url = "{postgres_url}"
[dispatch]
lease_seconds = 2
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "notify"
type = "http"
url = "{target}/hook"
timeout = 600
backoff_initial = 0.2
""",
            encoding="utf-8",
        )
        replicas = [
            TracedReplica(config, tmp_path / f"{name}.log", name, otlp) for name in ("a", "b")
        ]
        try:
            await asyncio.gather(*(r.wait_ready() for r in replicas))
            body = reducto_body("job-traced")
            async with httpx.AsyncClient() as client:
                answer = await client.post(
                    f"{replicas[0].url}/webhooks/reducto",
                    content=body,
                    headers=signed_headers(body, msg_id="msg-traced", timestamp=int(time.time())),
                )
            assert answer.status_code == 200, answer.text
            async with asyncio.timeout(20):
                await downstream.first.wait()
            await collector.wait_for(lambda c: bool(c.named("POST /webhooks/")))
            holder = await one_row(postgres_url, "SELECT lease_owner FROM dispatches")
            pid = int(holder["lease_owner"].split(":")[1])
            victim = next(r for r in replicas if r.process.pid == pid)
            victim.process.send_signal(signal.SIGKILL)  # mid-delivery: its lease runs out
            victim.process.wait(timeout=10)
            await collector.wait_for(
                lambda c: any(
                    s.attributes.get("jobhook.outcome") == "succeeded"
                    for s in c.named("jobhook.deliver notify")
                ),
                timeout=30,
            )
        finally:
            downstream.release.set()
            for replica in replicas:
                replica.stop(graceful=True)
    (webhook,) = collector.named("POST /webhooks/")
    (delivered,) = [
        s
        for s in collector.named("jobhook.deliver notify")
        if s.attributes["jobhook.outcome"] == "succeeded"
    ]
    survivor = next(r for r in replicas if r is not victim)
    assert webhook.resource["service.instance.id"] == "a"
    assert delivered.resource["service.instance.id"] == survivor.name
    assert delivered.attributes["jobhook.attempt"] == 2
    assert delivered.trace_id == webhook.trace_id
    # Both replicas' requests (the killed one's and the survivor's) named the same trace.
    assert len(downstream.traceparents) == 2
    assert {tracing.trace_id(t) for t in downstream.traceparents} == {webhook.trace_id}
    stored = await one_row(postgres_url, "SELECT traceparent FROM completions")
    assert tracing.trace_id(stored["traceparent"]) == webhook.trace_id
