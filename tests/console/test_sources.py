"""The console for a token limited to some sources: its jobs list, a job's page, the overview,
live and the dead letters show only its sources' jobs, another source's job is a missing page,
and its replay form answers as for a missing job."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING

import httpx

from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.adminsupport import BOSS, deliver_to, sources_config
from tests.console.support import csrf_of, log_in
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

# A handler nobody listens for: each delivery to it is dead after one attempt.
DEAD_HOOK = '[[handlers]]\nname = "hook"\ntype = "http"\nurl = "http://127.0.0.1:9/x"\n'
DEAD_HOOK += "max_attempts = 1\n"


async def _dead(c: httpx.AsyncClient, count: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        stats = (await c.get("/jobs/stats", headers=BOSS)).json()
        if stats["handler_failures"].get("hook", {}).get("dead") == count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the deliveries to hook did not die")


def _jobs_tile(html: str) -> str:
    found = re.search(r"<dt>Jobs</dt><dd>(\d+)</dd>", html)
    assert found is not None
    return found.group(1)


async def test_a_limited_token_sees_only_its_sources_in_the_console(tmp_path: Path) -> None:
    app = create_app(load_settings(sources_config(tmp_path, extra=DEAD_HOOK), environ={}))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver_to(c, "docs", "doc-one")
        await deliver_to(c, "billing", "bill-one")
        await _dead(c, 2)
        assert (await log_in(c, "team-secret-4b1d")).status_code == 303
        jobs = (await c.get("/ui/jobs")).text
        other = await c.get("/ui/jobs/billing/bill-one")
        missing = await c.get("/ui/jobs/billing/nope")
        mine = await c.get("/ui/jobs/docs/doc-one")
        overview = (await c.get("/ui/overview")).text
        live = (await c.get("/ui/live")).text
        dead = (await c.get("/ui/dead")).text
        replay = await c.post("/ui/jobs/billing/bill-one/replay", data={"csrf": csrf_of(mine.text)})
        by_filter = (await c.get("/ui/jobs", params={"source": "billing"})).text
    assert "doc-one" in jobs
    assert "bill-one" not in jobs
    assert '<option value="billing"' not in jobs
    assert "bill-one" not in by_filter
    assert (other.status_code, missing.status_code, mine.status_code) == (404, 404, 200)
    # Another source's job is the page of a job that does not exist.
    assert "No job <code>bill-one</code> of source <code>billing</code> is known" in other.text
    assert "No job <code>nope</code> of source <code>billing</code> is known" in missing.text
    assert _jobs_tile(overview) == "1"
    assert "<dt>Dead deliveries</dt><dd>1</dd>" in overview
    assert "does not see it" in overview  # the service's backlog is every source's
    assert "doc-one" in live
    assert "bill-one" not in live
    assert "docs" in dead
    assert "bill-one" not in dead
    assert (replay.status_code, replay.text) == (404, "no such job")
