"""Turning tracing on: the ``OTEL_*`` switches and ``[tracing]``, the missing extra, the export,
and the processor that puts trace ids in log lines."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from receiver import tracing
from receiver.config.tracing import TracingSettings
from receiver.errors import ConfigError
from receiver.ops import tracing as ops_tracing
from receiver.ops.log import add_trace_ids, configure_logging
from tests.conftest import forget_cached_loggers
from tests.otlp import Collector
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("settings", "environ", "on"),
    [
        (None, {}, False),
        (None, {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, False),
        (None, ENDPOINT, True),
        (None, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        (None, {"OTEL_TRACES_EXPORTER": "console"}, True),
        (None, {**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        (None, {**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        (TracingSettings(), {}, True),
        (TracingSettings(enabled=False), ENDPOINT, False),
        (TracingSettings(), {"OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_tracing_is_on_when_an_endpoint_or_the_tracing_table_asks(
    settings: TracingSettings | None, environ: dict[str, str], on: bool
) -> None:
    assert ops_tracing.requested(settings, environ) is on


def test_off_builds_nothing() -> None:
    assert ops_tracing.build(None, {}) is None


def test_asking_for_tracing_without_the_extra_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"pip install 'jobhook\[otel\]'.*uv sync --extra otel"):
        ops_tracing.build(None, ENDPOINT)


def test_grpc_without_its_exporter_fails_naming_the_package() -> None:
    with pytest.raises(ConfigError, match="opentelemetry-exporter-otlp-proto-grpc"):
        ops_tracing.build(None, {**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


def test_the_service_without_tracing_imports_nothing_from_opentelemetry(tmp_path: Path) -> None:
    """A webhook in and its completion delivered, in a fresh interpreter without OTEL_*."""
    config = tmp_path / "jobhook.toml"
    done = tmp_path / "out" / "reducto" / "job-off.json"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[sources.reducto]\nprovider = "reducto"\n'
        f'secrets = ["{SECRET}"]\n[[handlers]]\nname = "files"\ntype = "file"\n'
        f'dir = "{tmp_path / "out"}"\n'
    )
    script = textwrap.dedent(
        f"""
        import asyncio, os, pathlib, sys
        import httpx
        from receiver.config.load import load_settings
        from receiver.service.app import create_app
        from tests.support import live_server, reducto_body, signed_headers

        async def main():
            settings = load_settings(pathlib.Path({str(config)!r}), environ={{}})
            async with live_server(create_app(settings)) as url, httpx.AsyncClient() as client:
                body = reducto_body("job-off")
                answer = await client.post(
                    url + "/webhooks/reducto", content=body, headers=signed_headers(body)
                )
                assert answer.status_code == 200, answer.text
                async with asyncio.timeout(20):
                    while not os.path.exists({str(done)!r}):
                        await asyncio.sleep(0.02)

        asyncio.run(main())
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environ,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[]"
    document = json.loads(done.read_text())
    assert "traceparent" not in document


async def test_spans_reach_an_otlp_collector_with_the_service_resource() -> None:
    collector = Collector()
    async with live_server(collector.app) as url:
        settings = TracingSettings(
            endpoint=url, service_name="jobhook-test", resource_attributes={"team": "docs"}
        )
        backend = ops_tracing.build(settings, {})
        assert backend is not None
        tracing.install(backend)
        try:
            outer_attributes = {"jobhook.source": "reducto", "skip": None}
            with (
                tracing.span("outer", attributes=outer_attributes),
                tracing.span("inner", kind="client") as span,
            ):
                span.set("jobhook.result.bytes", 12)
        finally:
            tracing.install(None)
            await asyncio.to_thread(backend.shutdown)
    outer, inner = sorted(collector.spans, key=lambda s: s.name, reverse=True)
    assert (outer.name, inner.name) == ("outer", "inner")
    assert outer.trace_id == inner.trace_id
    assert inner.parent_id == outer.span_id
    assert inner.kind == "SPAN_KIND_CLIENT"
    assert outer.attributes == {"jobhook.source": "reducto"}
    assert inner.attributes == {"jobhook.result.bytes": 12}
    assert outer.resource["service.name"] == "jobhook-test"
    assert outer.resource["team"] == "docs"


@pytest.fixture
def traced_logs() -> Iterator[None]:
    configure_logging("debug", "json", trace_ids=True)
    forget_cached_loggers()
    yield
    import logging

    import structlog

    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


@pytest.mark.usefixtures("tracer", "traced_logs")
def test_a_line_logged_inside_a_span_carries_its_trace_and_span_ids(
    capfd: pytest.CaptureFixture[str],
) -> None:
    import structlog

    log = structlog.get_logger("test")
    with tracing.span("work"):
        ids = tracing.current_ids()
        log.info("inside")
    log.info("outside")
    lines = [json.loads(line) for line in capfd.readouterr().err.splitlines()]
    inside, outside = (next(e for e in lines if e["event"] == n) for n in ("inside", "outside"))
    assert ids is not None
    assert (inside["trace_id"], inside["span_id"]) == ids
    assert "trace_id" not in outside


def test_the_trace_id_processor_is_installed_only_with_tracing() -> None:
    import structlog

    configure_logging("info", "json")
    try:
        assert add_trace_ids not in structlog.get_config()["processors"]
        configure_logging("info", "json", trace_ids=True)
        assert add_trace_ids in structlog.get_config()["processors"]
    finally:
        import logging

        logging.getLogger().handlers.clear()
        structlog.reset_defaults()
