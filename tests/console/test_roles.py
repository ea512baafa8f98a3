"""The console by role over a real server: who is signed in, only the actions the role may
take, a forged post refused and audited, the audit page for admins, sessions that follow a
reload, and failed logins throttled per client address without touching webhooks."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import App, create_app
from receiver.service.reload import Reloader
from receiver.store.audit import AuditFilter
from tests.adminsupport import SECRETS, deliver, token_config
from tests.console.support import csrf_of, log_in
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

JOB = "/ui/jobs/reducto/done-1"


@dataclass
class Served:
    url: str
    config: Path
    app: App


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    config = token_config(
        tmp_path, extra_server='trusted_proxies = ["127.0.0.1"]\nlogin_attempts = 5'
    )
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url) as c:
            assert (await deliver(c, "done-1")).status_code == 200
        yield Served(url, config, app)


@contextlib.asynccontextmanager
async def _signed_in(url: str, name: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url) as client:
        assert (await log_in(client, SECRETS[name])).status_code == 303
        yield client


async def test_a_read_token_sees_no_actions_and_a_forged_post_is_refused_and_audited(
    served: Served,
) -> None:
    url = served.url
    async with _signed_in(url, "viewer") as viewer:
        page = (await viewer.get(JOB)).text
        dead = (await viewer.get("/ui/dead")).text
        forged = await viewer.post(f"{JOB}/replay", data={"csrf": csrf_of(page)})
        reprocess = await viewer.post(f"{JOB}/reprocess", data={"csrf": csrf_of(page)})
        audit_page = await viewer.get("/ui/audit")
    assert "viewer · read" in page
    assert "Replay to" not in page
    assert "Reprocess at the provider" not in page
    assert 'action="/ui/dead/replay"' not in dead
    assert 'href="/ui/audit"' not in page
    assert (forged.status_code, reprocess.status_code, audit_page.status_code) == (403, 403, 403)
    assert "'operate'" in forged.text
    async with _signed_in(url, "boss") as boss:
        rows = (await boss.get("/ui/audit?token=viewer")).text
    assert "console_replay" in rows
    assert "console_reprocess" in rows
    assert "forbidden" in rows


async def test_an_operate_token_replays_and_the_audit_page_shows_it(
    served: Served,
) -> None:
    url = served.url
    async with _signed_in(url, "ops") as ops:
        page = (await ops.get(JOB)).text
        assert "ops · operate" in page
        assert "Replay to all handlers" in page
        replay = await ops.post(f"{JOB}/replay", data={"csrf": csrf_of(page)})
        assert replay.status_code == 303
        count = await ops.post("/ui/dead/replay", data={"csrf": csrf_of(page)})
        assert count.status_code == 200  # the count step: nothing changed, nothing recorded
    async with _signed_in(url, "boss") as boss:
        page = (await boss.get("/ui/jobs")).text
        assert 'href="/ui/audit"' in page
        rows = (await boss.get("/ui/audit?token=ops")).text
    assert "console_replay" in rows
    assert "reducto/done-1" in rows
    assert "console_dead_replay" not in rows


async def test_a_reload_ends_a_removed_tokens_sessions_and_applies_a_changed_role(
    served: Served,
) -> None:
    async with _signed_in(served.url, "viewer") as viewer, _signed_in(served.url, "ops") as ops:
        await _reload_without_ops(served, viewer, ops)


async def _reload_without_ops(
    served: Served, viewer: httpx.AsyncClient, ops: httpx.AsyncClient
) -> None:
    removed = f'[[server.tokens]]\nname = "ops"\nrole = "operate"\nsecrets = ["{SECRETS["ops"]}"]\n'
    text = served.config.read_text(encoding="utf-8")
    assert removed in text
    text = text.replace(removed, "").replace('role = "read"', 'role = "operate"')
    served.config.write_text(text, encoding="utf-8")
    assert await Reloader(served.app, served.config).reload("test")
    assert "Replay to all handlers" in (await viewer.get(JOB)).text
    gone = await ops.get(JOB)
    assert gone.status_code == 303
    assert gone.headers["location"].startswith("/ui/login")


async def test_wrong_logins_are_throttled_per_address_and_webhooks_go_on(served: Served) -> None:
    attacker = {"X-Forwarded-For": "198.51.100.7"}
    async with httpx.AsyncClient(base_url=served.url) as c:
        answers = [
            (await c.post("/ui/login", data={"token": f"guess-{i}"}, headers=attacker))
            for i in range(30)
        ]
        right_token = await c.post("/ui/login", data={"token": SECRETS["viewer"]}, headers=attacker)
        webhook = await deliver(c, "during-the-flood")
        other = await c.post(
            "/ui/login", data={"token": SECRETS["viewer"]}, headers={"X-Forwarded-For": "192.0.2.1"}
        )
        metrics = (await c.get("/metrics")).text
    assert [a.status_code for a in answers] == [401] * 5 + [429] * 25
    assert 0 < int(answers[-1].headers["retry-after"]) <= 300
    assert right_token.status_code == 429  # the address waits, whatever it sends
    assert webhook.status_code == 200
    assert other.status_code == 303
    assert 'jobhook_admin_refused_total{reason="login_throttled"} 26.0' in metrics
    assert 'jobhook_admin_refused_total{reason="login_refused"} 5.0' in metrics
    rows = await served.app.state.store.audit_rows(AuditFilter(action="console_login"),
                                                   after_id=None, limit=10)  # fmt: skip
    assert [(r.client, r.outcome, r.attempts) for r in rows] == [
        ("198.51.100.7", "unauthorized", 5)
    ]
