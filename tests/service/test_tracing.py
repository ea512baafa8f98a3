"""One trace per completion, as a real OTLP collector on loopback receives it: the webhook's
span starts it, the dispatcher continues it from the store (after a restart too), every handler
sends it on, and log lines carry it."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver import tracing
from receiver.config.load import load_settings
from receiver.models import Event, State
from receiver.ops.log import configure_logging
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.admin.test_events import EventReader
from tests.adminsupport import AUTH, TOKEN
from tests.conftest import forget_cached_loggers
from tests.otlp import CollectedSpan, Collector, tracing_config
from tests.support import free_port, live_server, reducto_body, signed_headers
from tests.test_pipeline import API_KEY, pipeline_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from receiver.config.settings import Settings


class Downstream:
    """The http handler's target: keeps each request's traceparent."""

    def __init__(self) -> None:
        self.traceparents: list[str | None] = []
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.traceparents.append(request.headers.get("traceparent"))
        return JSONResponse({"ok": True})


def traced_settings(tmp_path: Path, sim_url: str, collector: str, target: str) -> Settings:
    """The pipeline tests' configuration, plus an http handler, an admin token and tracing."""
    return pipeline_settings(tmp_path, sim_url, extra=f"""
[[handlers]]
name = "notify"
type = "http"
url = "{target}/hook"
backoff_initial = 0.05
backoff_max = 0.1
max_attempts = 100
[server]
admin_token = "{TOKEN}"
{tracing_config(collector)}""")  # fmt: skip


@pytest.fixture
async def sim() -> AsyncIterator[tuple[Simulator, str]]:
    simulator = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=64 * 1024)
    async with live_server(build_app(simulator)) as url:
        yield simulator, url


@pytest.fixture
def traced_logs() -> Iterator[None]:
    configure_logging("info", "json", trace_ids=True)
    forget_cached_loggers()
    yield
    import logging

    import structlog

    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


async def post_webhook(url: str, job_id: str, msg_id: str) -> str:
    body = reducto_body(job_id)
    async with httpx.AsyncClient() as client:
        answer = await client.post(
            f"{url}/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=msg_id)
        )
    assert answer.status_code == 200, answer.text
    status: str = answer.json()["status"]
    return status


async def wait_until(done: Path, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not done.exists():
            await asyncio.sleep(0.02)


def one(spans: list[CollectedSpan], name: str) -> CollectedSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


@pytest.mark.usefixtures("traced_logs")
async def test_one_completion_is_one_trace_from_the_webhook_to_every_handler(
    tmp_path: Path, sim: tuple[Simulator, str], capfd: pytest.CaptureFixture[str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="url")
    simulator.inject(target="blobs", status=403, count=1)  # one expired URL, refreshed
    collector, downstream = Collector(), Downstream()
    sidecar = tmp_path / "out" / "reducto" / f"{job_id}.json"
    async with live_server(collector.app) as otlp, live_server(downstream.app) as target:
        settings = traced_settings(tmp_path, sim_url, otlp, target)
        async with live_server(create_app(settings)) as url:
            assert await post_webhook(url, job_id, "msg-1") == "accepted"
            assert await post_webhook(url, job_id, "msg-1") == "duplicate"
            await wait_until(sidecar)
            async with asyncio.timeout(20):
                while not downstream.traceparents:
                    await asyncio.sleep(0.02)
            async with httpx.AsyncClient(base_url=url, headers=AUTH) as admin:
                detail = (await admin.get(f"/jobs/reducto/{job_id}")).json()
                query = {"last_event_id": "0"}
                async with admin.stream("GET", "/events", params=query) as response:
                    event = await EventReader(response).next_event()
    assert not tracing.enabled()  # the lifespan turned it off again
    spans = collector.spans
    webhook, duplicate = (s for s in spans if s.name == "POST /webhooks/{source}")
    trace = webhook.trace_id
    in_trace = [s for s in spans if s.trace_id == trace]
    names = sorted(s.name for s in in_trace)
    assert names == sorted(
        [
            "POST /webhooks/{source}",
            "jobhook.webhook.verify",
            "jobhook.store.ingest",
            "jobhook.resolve",
            "jobhook.confirm",
            "jobhook.result.fetch",
            "jobhook.deliver files",
            "jobhook.deliver notify",
            "POST",
        ]
    )
    assert webhook.kind == "SPAN_KIND_SERVER"
    assert webhook.parent_id == ""
    assert webhook.attributes == {
        "http.request.method": "POST",
        "http.route": "/webhooks/{source}",
        "url.path": "/webhooks/reducto",
        "url.scheme": "http",
        "http.response.status_code": 200,
        "jobhook.source": "reducto",
        "jobhook.job.id": job_id,
        "jobhook.message.id": "msg-1",
        "jobhook.outcome": "accepted",
        "jobhook.duplicate": False,
    }
    assert duplicate.trace_id != trace  # a resend is news about nothing: its own trace
    assert duplicate.attributes["jobhook.duplicate"] is True
    by_id = {s.span_id: s for s in in_trace}
    for name in ("jobhook.webhook.verify", "jobhook.store.ingest"):
        assert one(in_trace, name).parent_id == webhook.span_id
    resolve = one(in_trace, "jobhook.resolve")
    assert by_id[resolve.parent_id] is webhook  # continued from the stored traceparent
    fetch = one(in_trace, "jobhook.result.fetch")
    assert fetch.parent_id == resolve.span_id
    assert fetch.attributes["jobhook.result.bytes"] == 64 * 1024
    assert fetch.attributes["jobhook.result.url_refreshes"] == 1
    assert fetch.attributes["jobhook.result.retries"] == 0
    assert fetch.attributes["server.address"] == "127.0.0.1"
    assert fetch.attributes["jobhook.result.seconds"] > 0
    assert one(in_trace, "jobhook.confirm").attributes["jobhook.provider.status"] == "Completed"
    notify = one(in_trace, "jobhook.deliver notify")
    assert notify.attributes == {
        "jobhook.source": "reducto",
        "jobhook.job.id": job_id,
        "jobhook.handler": "notify",
        "jobhook.attempt": 1,
        "jobhook.outcome": "succeeded",
    }
    post = one(in_trace, "POST")
    assert post.kind == "SPAN_KIND_CLIENT"
    assert post.parent_id == notify.span_id
    assert post.attributes["http.response.status_code"] == 200
    assert "?" not in post.attributes["url.full"]
    # Downstream: the http handler's request and the file handler's sidecar name the trace.
    (sent,) = downstream.traceparents
    assert tracing.trace_id(sent) == trace
    assert sent.split("-")[2] == post.span_id
    assert tracing.trace_id(json.loads(sidecar.read_text())["traceparent"]) == trace
    # The jobs API and the event stream name it too.
    assert detail["completion"]["trace_id"] == trace
    assert event["data"]["trace_id"] == trace
    # Log lines logged inside the spans carry the trace.
    lines = [json.loads(x) for x in capfd.readouterr().err.splitlines() if x.startswith("{")]
    delivered = [e for e in lines if e["event"] == "dispatch_succeeded"]
    assert delivered
    assert all(e["trace_id"] == trace for e in delivered)
    accepted = next(e for e in lines if e["event"] == "webhook_accepted")
    assert accepted["trace_id"] == trace


async def test_a_restart_between_intake_and_dispatch_keeps_the_trace(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    """The first process stores the completion and fails to deliver it; the second delivers
    it, continuing the trace from nothing but the traceparent in the store."""
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")
    collector, downstream = Collector(), Downstream()
    port = free_port()
    async with live_server(collector.app) as otlp:
        # Nothing listens on the target yet: the first process's deliveries fail.
        settings = traced_settings(tmp_path, sim_url, otlp, f"http://127.0.0.1:{port}")
        first_app = create_app(settings)
        async with live_server(first_app) as url:
            assert await post_webhook(url, job_id, "msg-1") == "accepted"
            async with asyncio.timeout(20):
                while not any(
                    row.handler == "notify" and row.last_error
                    for row in await first_app.state.store.dispatches_for("reducto", job_id)
                ):
                    await asyncio.sleep(0.02)
        first = list(collector.spans)  # exported when the first process stopped
        async with live_server(downstream.app, port=port), live_server(create_app(settings)):
            async with asyncio.timeout(20):
                while not downstream.traceparents:
                    await asyncio.sleep(0.02)
    webhook = one(first, "POST /webhooks/{source}")
    failed = [s for s in first if s.name == "jobhook.deliver notify"]
    assert failed
    assert all(s.status == "STATUS_CODE_ERROR" for s in failed)
    assert all(s.attributes["jobhook.outcome"] == "retry" for s in failed)
    delivered = [s for s in collector.spans[len(first) :] if s.name == "jobhook.deliver notify"]
    assert [s.attributes["jobhook.outcome"] for s in delivered] == ["succeeded"]
    assert delivered[0].attributes["jobhook.attempt"] == len(failed) + 1
    assert {s.trace_id for s in [*failed, *delivered]} == {webhook.trace_id}
    assert tracing.trace_id(downstream.traceparents[-1]) == webhook.trace_id


async def test_a_poll_that_finds_the_job_done_starts_its_completions_trace(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")  # no webhook will come
    collector, downstream = Collector(), Downstream()
    async with live_server(collector.app) as otlp, live_server(downstream.app) as target:
        traced_settings(tmp_path, sim_url, otlp, target)
        poll = "[sources.reducto.poll]\ngrace_seconds = 0.1\ninitial_delay = 0.1\n"
        config = tmp_path / "jobhook.toml"
        config.write_text(
            config.read_text().replace("[[handlers]]", poll + "[[handlers]]", 1), encoding="utf-8"
        )
        settings = load_settings(config, environ={})
        app = create_app(settings)
        async with live_server(app):
            await app.state.ingestor.ingest(
                Event("reducto", job_id, State.QUEUED, "tracked", via="track")
            )
            async with asyncio.timeout(20):
                while not downstream.traceparents:
                    await asyncio.sleep(0.02)
    poll_span = one(collector.spans, "jobhook.poll")
    assert poll_span.parent_id == ""
    assert poll_span.attributes["jobhook.outcome"] == "completed"
    assert poll_span.attributes["jobhook.state"] == "succeeded"
    delivered = one(collector.spans, "jobhook.deliver notify")
    assert delivered.trace_id == poll_span.trace_id
    assert tracing.trace_id(downstream.traceparents[0]) == poll_span.trace_id
