"""Logs: one JSON event per webhook, and no secret value anywhere in them."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
from typing import TYPE_CHECKING

import httpx

from receiver.app import create_app
from receiver.log import LineSink
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    import pytest

    from receiver.config import Settings


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
