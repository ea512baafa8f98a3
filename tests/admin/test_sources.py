"""A token limited to some sources, over a real server on SQLite and PostgreSQL: it sees only
their jobs (lists and pages, a job, its wait, stats, exports, the event stream, the audit trail),
another source's job answers as a missing one, and every action on another source is refused or
narrowed; its calls are audited under its name, and a reload changes its sources at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.service.reload import Reloader
from tests.adminsupport import BOSS, TEAM, deliver_to, sources_config
from tests.services import postgres_database
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


async def _delivered(c: httpx.AsyncClient, source: str, job_id: str) -> None:
    """Wait (a few seconds at most) until the job's delivery to the file handler succeeded."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = (await c.get(f"/jobs/{source}/{job_id}", headers=BOSS)).json()
        if [d["state"] for d in found.get("dispatches", [])] == ["succeeded"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{source}/{job_id} was not delivered")


@contextlib.asynccontextmanager
async def _store_url(kind: str) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield ""
        return
    async with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def client(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    """A served app with jobs docs/doc-one, docs/doc-two and billing/bill-one, each delivered."""
    async with _store_url(request.param) as store:
        app = create_app(load_settings(sources_config(tmp_path, store), environ={}))
        async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
            for source, job_id in (
                ("docs", "doc-one"),
                ("docs", "doc-two"),
                ("billing", "bill-one"),
            ):
                await deliver_to(c, source, job_id)
                await _delivered(c, source, job_id)
            yield c


def _ids(page: dict[str, Any]) -> list[str]:
    return [f"{j['source']}/{j['job_id']}" for j in page["jobs"]]


async def _events(c: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    """Every completion the stream sends from the start, up to its first heartbeat."""
    seen: list[str] = []
    params = {"last_event_id": "0", "heartbeat": "0.2"}
    async with c.stream("GET", "/events", params=params, headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line.removeprefix("data:"))
                seen.append(f"{data['source']}/{data['job_id']}")
            if line == ": heartbeat":
                return seen
    return seen


async def test_a_limited_token_reads_only_its_sources_jobs(client: httpx.AsyncClient) -> None:
    c = client
    assert sorted(_ids((await c.get("/jobs", headers=BOSS)).json())) == [
        "billing/bill-one", "docs/doc-one", "docs/doc-two"
    ]  # fmt: skip
    first = (await c.get("/jobs", params={"limit": 1}, headers=TEAM)).json()
    rest = (await c.get("/jobs", params={"cursor": first["next_cursor"]}, headers=TEAM)).json()
    assert sorted(_ids(first) + _ids(rest)) == ["docs/doc-one", "docs/doc-two"]
    assert rest["next_cursor"] is None
    assert _ids((await c.get("/jobs", params={"source": "billing"}, headers=TEAM)).json()) == []
    # Another source's job answers exactly as a job that does not exist.
    other = await c.get("/jobs/billing/bill-one", headers=TEAM)
    missing = await c.get("/jobs/billing/bill-one", headers=BOSS)
    assert (await c.get("/jobs/billing/nope", headers=BOSS)).status_code == 404
    assert missing.status_code == 200
    assert (other.status_code, other.json()) == (404, {
        "error": "unknown_job", "detail": "no job 'bill-one' of source 'billing'"})  # fmt: skip
    assert (await c.get("/jobs/docs/doc-one", headers=TEAM)).status_code == 200
    wait = await c.get("/jobs/billing/bill-one/wait", params={"timeout": 0}, headers=TEAM)
    assert (wait.status_code, wait.json()["error"]) == (404, "unknown_job")
    stats = (await c.get("/jobs/stats", headers=TEAM)).json()
    assert (stats["total"], stats["by_source"]) == (2, {"docs": 2})
    assert stats["handler_failures"] == {"files": {"dead": 0, "retrying": 0}}
    assert (await c.get("/jobs/stats", headers=BOSS)).json()["total"] == 3
    export = (await c.get("/jobs/export", params={"format": "jsonl"}, headers=TEAM)).text
    assert sorted(json.loads(line)["job_id"] for line in export.splitlines()) == [
        "doc-one",
        "doc-two",
    ]
    csv = (await c.get("/jobs/export", params={"format": "csv"}, headers=TEAM)).text
    assert "bill-one" not in csv
    assert "doc-one" in csv
    assert sorted(await _events(c, TEAM)) == ["docs/doc-one", "docs/doc-two"]
    assert sorted(await _events(c, BOSS)) == ["billing/bill-one", "docs/doc-one", "docs/doc-two"]
    status = (await c.get("/status", headers=TEAM)).json()
    assert list(status["sources"]) == ["docs"]


async def test_a_limited_token_acts_only_on_its_sources(client: httpx.AsyncClient) -> None:
    c = client
    other = await c.post("/jobs", json={"source": "billing", "job_id": "t1"}, headers=TEAM)
    assert other.status_code == 403
    assert other.json()["error"] == "forbidden"
    assert "may use only the sources docs" in other.json()["detail"]
    unknown = await c.post("/jobs", json={"source": "nowhere", "job_id": "t1"}, headers=TEAM)
    assert unknown.status_code == 403  # the same refusal: which sources exist is not told
    assert (await c.post("/jobs", json={"source": "docs", "job_id": "t1"},
                         headers=TEAM)).status_code == 200  # fmt: skip
    for action in ("replay", "reprocess"):
        refused = await c.post(f"/jobs/billing/bill-one/{action}", headers=TEAM)
        assert (refused.status_code, refused.json()["error"]) == (404, "unknown_job"), action
    again = {"include_succeeded": True}
    assert (await c.post("/jobs/docs/doc-one/replay", json=again, headers=TEAM)).json() == {
        "requeued": 1
    }
    named = await c.post("/jobs/replay", json={"source": "billing"}, headers=TEAM)
    assert named.status_code == 403
    assert "docs" in named.json()["detail"]
    count = {"dispatch_state": "succeeded", "dry_run": True}
    assert (await c.post("/jobs/replay", json=count, headers=BOSS)).json()["count"] >= 2
    await _delivered(c, "docs", "doc-one")
    assert (await c.post("/jobs/replay", json=count, headers=TEAM)).json()["count"] == 2
    bulk = await c.post("/jobs/replay", json={"dispatch_state": "succeeded"}, headers=TEAM)
    assert bulk.json()["requeued"] == 2
    reprocess = await c.post("/jobs/reprocess", json={"source": "billing"}, headers=TEAM)
    assert reprocess.status_code == 403
    mine = (await c.get("/audit", headers=TEAM)).json()["entries"]
    every = (await c.get("/audit", headers=BOSS)).json()["entries"]
    assert {e["token"] for e in every} == {"team"}
    assert {e["target"] for e in mine} == {"docs/t1", "docs/doc-one"}  # rows naming its jobs only
    outcomes = {(e["action"], e["target"], e["outcome"]) for e in every}
    assert ("track_job", "docs/t1", "ok") in outcomes
    assert ("track_job", "billing/t1", "forbidden") in outcomes
    assert ("replay_job", "billing/bill-one", "rejected") in outcomes
    assert ("replay_job", "docs/doc-one", "ok") in outcomes


async def test_a_reload_applies_changed_sources_from_the_next_request(tmp_path: Path) -> None:
    config = sources_config(tmp_path)
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver_to(c, "docs", "doc-one")
        await deliver_to(c, "billing", "bill-one")
        assert _ids((await c.get("/jobs", headers=TEAM)).json()) == ["docs/doc-one"]
        text = config.read_text(encoding="utf-8").replace('["docs"]', '["billing"]')
        config.write_text(text, encoding="utf-8")
        assert await Reloader(app, config).reload("test")
        assert _ids((await c.get("/jobs", headers=TEAM)).json()) == ["billing/bill-one"]
        assert (await c.get("/jobs/docs/doc-one", headers=TEAM)).status_code == 404
        config.write_text(text.replace('sources = ["billing"]\n', ""), encoding="utf-8")
        assert await Reloader(app, config).reload("test")
        assert len((await c.get("/jobs", headers=TEAM)).json()["jobs"]) == 2
