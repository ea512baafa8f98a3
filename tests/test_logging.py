"""Logs: one JSON event per webhook, and no secret value anywhere in them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx

from receiver.app import create_app
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
