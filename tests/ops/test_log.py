"""Logs: one JSON event per webhook, and no secret value anywhere in them."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import json
import threading
from typing import TYPE_CHECKING

import httpx

from receiver.ops.log import LineSink, UTCStamper, render_json
from receiver.service.app import create_app
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    import pytest

    from receiver.config.settings import Settings


async def test_webhook_events_are_json_and_never_contain_secrets(
    settings: Settings, capfd: pytest.CaptureFixture[str], json_logs: None
) -> None:
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        body = reducto_body("job-log")
        await c.post("/webhooks/reducto", content=body, headers=signed_headers(body))
        await c.post(
            "/webhooks/reducto",
            content=body,
            headers={**signed_headers(body), "svix-signature": "v1,AAAA"},
        )
    out, err = capfd.readouterr()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    accepted = [e for e in lines if e["event"] == "webhook_accepted"]
    assert accepted
    assert accepted[0]["source"] == "reducto"
    assert accepted[0]["job_id"] == "job-log"
    assert accepted[0]["message_id"] == "msg_1"
    assert any(e["event"] == "webhook_rejected" and e["outcome"] == "bad_signature" for e in lines)
    secret_body = SECRET.removeprefix("whsec_")
    assert secret_body not in out + err
    assert "Invoice" not in out + err


async def test_lines_logged_on_the_loop_go_out_together_in_order() -> None:
    """Batching: lines logged during one pass of the loop are written in one go at its end;
    a line from another thread writes what is pending first, so the order holds."""
    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    sink = LineSink()
    sink.batching = True
    loop = asyncio.get_running_loop()
    with contextlib.redirect_stderr(Recorder()), sink.batching_in(loop):
        sink.line("one")
        sink.line("two")
        assert writes == []  # not yet: the loop has not finished this pass
        await asyncio.sleep(0)
        assert writes == ["one\ntwo\n"]
        sink.line("three")
        # The loop is blocked while the other thread writes: its scheduled flush cannot run,
        # so "three" comes first only because the sink writes what is pending first.
        other = threading.Thread(target=sink.line, args=("from a thread",))
        other.start()
        other.join()
        assert writes[1:] == ["three\n", "from a thread\n"]
        sink.line("four")
    assert writes[-1] == "four\n"  # leaving the block writes what is pending


def test_without_batching_every_line_is_written_at_once() -> None:
    """Tests and CLI commands: ``batching`` off (the default), ``batch_in`` changes nothing."""
    sink = LineSink()
    out = io.StringIO()
    loop = asyncio.new_event_loop()
    try:
        with contextlib.redirect_stderr(out):
            sink.batch_in(loop)
            sink.line("now")
            assert out.getvalue() == "now\n"
    finally:
        loop.close()


def test_a_closed_loop_does_not_swallow_lines() -> None:
    sink = LineSink()
    sink.batching = True
    out = io.StringIO()
    loop = asyncio.new_event_loop()
    with contextlib.redirect_stderr(out):
        sink.batch_in(loop)
        loop.close()
        sink.line("after close")
        assert out.getvalue() == "after close\n"
        sink.batch_in(None)


def test_the_stamper_writes_iso_utc_microseconds_and_follows_the_second() -> None:
    now = [1_700_000_000.25]
    stamp = UTCStamper(clock=lambda: now[0])
    seen = []
    for at in (1_700_000_000.25, 1_700_000_000.999_999_5, 1_700_000_001.0, 1_700_086_400.5):
        now[0] = at
        seen.append(stamp(None, "info", {})["timestamp"])
    assert seen == [
        "2023-11-14T22:13:20.250000Z",
        "2023-11-14T22:13:20.999999Z",  # the last microsecond of a second
        "2023-11-14T22:13:21.000000Z",
        "2023-11-15T22:13:20.500000Z",  # the cached date moves on with the second
    ]
    for text in seen:  # ISO 8601 that datetime reads back, in UTC
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        assert parsed.tzinfo == datetime.UTC


def test_the_stamper_agrees_with_the_clock_of_the_machine() -> None:
    before = datetime.datetime.now(datetime.UTC)
    text = UTCStamper()(None, "info", {})["timestamp"]
    after = datetime.datetime.now(datetime.UTC)
    assert before <= datetime.datetime.fromisoformat(text.replace("Z", "+00:00")) <= after


def test_json_lines_keep_what_orjson_refuses() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    event = {"event": "x", "wide": 2**70, "text": "café", "n": 3, "flag": None}
    assert json.loads(render_json(event)) == event  # a 70-bit integer: through json.dumps
    assert json.loads(render_json({1: "a"})) == {"1": "a"}  # a non-string key: likewise
    line = render_json({"event": "x", "thing": Opaque()}, default=repr)
    assert json.loads(line) == {"event": "x", "thing": "<opaque>"}


def test_the_providers_sdk_loggers_stay_at_warning_when_the_service_logs_at_debug() -> None:
    """The SDKs' own DEBUG lines hold signed request headers: each provider names its SDK's
    loggers and the service keeps them at WARNING, whatever level it logs at."""
    import logging

    import structlog

    from receiver.ops.log import configure_logging
    from receiver.providers import PROVIDERS

    quiet = sorted({name for cls in PROVIDERS.values() for name in cls.sdk_loggers})
    assert {"botocore", "boto3", "azure", "google.auth"} <= set(quiet)
    configure_logging("debug", "json", quiet=quiet)
    try:
        assert logging.getLogger().level == logging.DEBUG
        assert all(logging.getLogger(name).level == logging.WARNING for name in quiet)
        assert not logging.getLogger("botocore.auth").isEnabledFor(logging.DEBUG)
    finally:
        logging.getLogger().handlers.clear()
        structlog.reset_defaults()
