"""``GET /metrics``: counters move with webhooks, deliveries, job API calls and downloads."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from receiver.store.sqlite import checkpoint
from tests.adminsupport import admin_settings, deliver
from tests.support import live_server, reducto_body, signed_headers
from tests.test_pipeline import API_KEY, pipeline_settings

if TYPE_CHECKING:
    from pathlib import Path

FAILING = """
[[handlers]]
name = "flaky"
type = "command"
command = ["false"]
max_attempts = 2
backoff_initial = 3600
backoff_max = 3600

[[handlers]]
name = "broken"
type = "command"
command = ["false"]
max_attempts = 1
"""


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` (no auth needed), by name and sorted labels."""
    response = await client.get("/metrics", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:  # fmt: skip
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_webhook_counters_move_by_outcome_and_reason(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path, token=None))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        before = await scrape(client)
        await deliver(client, "job-1", msg_id="m1")
        await deliver(client, "job-1", msg_id="m1")  # duplicate
        body = reducto_body("job-2")
        headers = signed_headers(body, secret="whsec_" + "A" * 32)  # a secret we do not have
        await client.post("/webhooks/reducto", content=body, headers=headers)
        await client.post("/webhooks/attacker-chosen-name", content=body, headers=headers)
        after = await scrape(client)
    assert value(before, "jobhook_webhooks_total", source="reducto", outcome="accepted") == 0
    assert value(after, "jobhook_webhooks_total", source="reducto", outcome="accepted") == 1
    assert value(after, "jobhook_webhooks_total", source="reducto", outcome="duplicate") == 1
    assert value(after, "jobhook_webhook_rejections_total", source="reducto",
                 reason="bad_signature") == 1  # fmt: skip
    # An unknown source does not mint a time series of its own.
    assert value(after, "jobhook_webhook_rejections_total", source="_unknown",
                 reason="unknown_source") == 1  # fmt: skip
    assert not any("attacker" in str(key) for key in after)
    assert value(after, "jobhook_webhook_seconds_count", outcome="accepted") == 1
    assert value(after, "jobhook_events_total", via="webhook", outcome="completed") == 1
    assert value(after, "jobhook_events_total", via="webhook", outcome="duplicate") == 1


async def test_delivery_counters_and_backlog_gauges_follow_the_handlers(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path, token=None, extra=FAILING))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "job-1")
        async with asyncio.timeout(20):
            while True:
                samples = await scrape(client)
                done = [value(samples, "jobhook_handler_deliveries_total", handler=h, outcome=o)
                        for h, o in (("files", "succeeded"), ("flaky", "retry"),
                                     ("broken", "dead"))]  # fmt: skip
                if all(done):
                    break
                await asyncio.sleep(0.05)
    assert done == [1, 1, 1]
    # "flaky" waits an hour for its next attempt: pending, and as old as the completion.
    assert value(samples, "jobhook_queue_depth", kind="pending") == 1
    assert value(samples, "jobhook_queue_depth", kind="dead") == 1
    assert value(samples, "jobhook_queue_depth", kind="resolving") == 0
    assert value(samples, "jobhook_oldest_pending_seconds") > 0
    assert value(samples, "jobhook_store_up") == 1
    assert value(samples, "jobhook_handler_seconds_count", handler="broken") == 1
    assert value(samples, "jobhook_handler_delay_seconds_count", handler="files") == 1


async def test_each_app_counts_on_its_own(tmp_path: Path) -> None:
    first = create_app(admin_settings(tmp_path / "a", token=None))
    second = create_app(admin_settings(tmp_path / "b", token=None))
    async with (
        live_server(first) as a,
        live_server(second) as b,
        httpx.AsyncClient(base_url=a) as ca,
        httpx.AsyncClient(base_url=b) as cb,
    ):
        await deliver(ca, "job-1")
        counted = [value(await scrape(c), "jobhook_webhooks_total", source="reducto",
                         outcome="accepted") for c in (ca, cb)]  # fmt: skip
    assert counted == [1, 0]


async def test_job_api_calls_and_fetched_bytes_are_counted(tmp_path: Path) -> None:
    simulator = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=200_000)
    async with live_server(build_app(simulator)) as sim_url:
        (job_id,) = simulator.create_jobs(1, result="url")
        app = create_app(pipeline_settings(tmp_path, sim_url))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
            await deliver(client, job_id)
            result = tmp_path / "out" / "reducto" / f"{job_id}.result"
            async with asyncio.timeout(20):
                while not result.exists():
                    await asyncio.sleep(0.02)
            samples = await scrape(client)
    assert value(samples, "jobhook_provider_api_calls_total", source="reducto", status="200") >= 1
    assert value(samples, "jobhook_result_bytes_fetched_total") == result.stat().st_size
    assert ("jobhook_rate_limit_wait_seconds_total", (("source", "reducto"),)) in samples
    assert ("jobhook_rate_limit_waits_total", (("source", "reducto"),)) in samples


def test_webhook_answers_are_exposed_as_prometheus_client_s_own_metrics_would_be() -> None:
    """WebhookAnswers counts without prometheus_client's locks; a scrape must read exactly as
    that of its Counter and Histogram fed the same answers (but for the creation times)."""
    import re

    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from receiver.ops.metrics import _FAST, Metrics

    answers = [
        ("reducto", "accepted", 0.0004, None),
        ("reducto", "accepted", 0.001, None),
        ("reducto", "duplicate", 0.007, None),
        ("reducto", "rejected", 0.02, "bad_signature"),
        ("nope", "rejected", 12.0, "unknown_source"),
        ("reducto", "failed", 0.3, None),
    ]
    ours = Metrics(["reducto"])
    for source, outcome, seconds, reason in answers:
        ours.webhook(source, outcome, seconds, reason)
    theirs = CollectorRegistry()
    webhooks = Counter(
        "jobhook_webhooks",
        "Webhook requests by source and outcome: accepted, duplicate, rejected, failed.",
        ["source", "outcome"],
        registry=theirs,
    )
    rejections = Counter(
        "jobhook_webhook_rejections",
        "Webhooks refused with a 4xx, by source and reason (bad_signature, ...).",
        ["source", "reason"],
        registry=theirs,
    )
    timed = Histogram(
        "jobhook_webhook_seconds",
        "Time to read, verify and durably store a webhook, by outcome.",
        ["outcome"],
        buckets=_FAST,
        registry=theirs,
    )
    for source, outcome, seconds, reason in answers:
        label = source if source == "reducto" else "_unknown"
        if reason:
            rejections.labels(label, reason).inc()
        webhooks.labels(label, outcome).inc()
        timed.labels(outcome).observe(seconds)

    def text(registry: CollectorRegistry, names: tuple[str, ...]) -> str:
        lines = generate_latest(registry).decode().splitlines()
        wanted = [line for line in lines if any(name in line for name in names)]
        return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", "\n".join(wanted))

    names = ("jobhook_webhooks_", "jobhook_webhook_rejections", "jobhook_webhook_seconds")
    assert text(ours.registry, names) == text(theirs, names)
    assert "jobhook_webhook_seconds_bucket" in text(ours.registry, names)


STORE_SERIES = (
    "jobhook_store_checkpoints_total",
    "jobhook_store_checkpoint_frames_total",
    "jobhook_store_checkpoint_seconds_total",
    "jobhook_store_wal_restarts_total",
    "jobhook_store_write_hold_frames_total",
    "jobhook_store_write_hold_timeouts_total",
    "jobhook_store_write_hold_seconds_count",
    "jobhook_store_write_hold_seconds_sum",
    "jobhook_store_wal_frames",
    "jobhook_store_wal_bytes",
)


async def test_a_sqlite_store_s_checkpoints_and_write_holds_are_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "RESTART_FRAMES", 16)  # a restart within a few webhooks
    app = create_app(admin_settings(tmp_path, token=None))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        before = await scrape(client)
        sent = 0
        async with asyncio.timeout(30):
            while True:
                await asyncio.gather(*(deliver(client, f"job-{sent + n}") for n in range(20)))
                sent += 20
                after = await scrape(client)
                if value(after, "jobhook_store_wal_restarts_total") >= 1:
                    break
    for name in STORE_SERIES:
        assert (name, ()) in before, name
    assert value(after, "jobhook_store_checkpoints_total") >= 1
    assert value(after, "jobhook_store_checkpoint_frames_total") > value(
        before, "jobhook_store_checkpoint_frames_total"
    )
    holds = value(after, "jobhook_store_write_hold_seconds_count")
    assert holds >= 1
    assert value(after, "jobhook_store_write_hold_seconds_bucket", le="+Inf") == holds
    assert value(after, "jobhook_store_write_hold_seconds_sum") > 0
    assert value(after, "jobhook_store_wal_bytes") > 0


@pytest.mark.postgres
async def test_a_postgresql_store_exports_no_checkpoint_series(
    tmp_path: Path, postgres_url: str
) -> None:
    app = create_app(
        admin_settings(tmp_path, token=None, extra=f'[store]\nurl = "{postgres_url}"\n')
    )
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "job-1")
        samples = await scrape(client)
    assert value(samples, "jobhook_store_up") == 1
    assert value(samples, "jobhook_webhooks_total", source="reducto", outcome="accepted") == 1
    assert not [name for name, _ in samples if name.startswith("jobhook_store_") and
                name != "jobhook_store_up"]  # fmt: skip
