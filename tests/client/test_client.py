"""Every method of ``Client`` and ``AsyncClient`` against a real jobhook on loopback: the same
test body runs on both (the sync one in a thread), so they cannot drift apart."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.client import Client, WaitTimeout
from receiver.models import Event, Progress, State
from receiver.service.app import create_app
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.client.helpers import Both
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[Starlette, str]]:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url:
        yield app, url


@pytest.fixture(params=["sync", "async"])
async def jobhook(
    request: pytest.FixtureRequest, service: tuple[Starlette, str]
) -> AsyncIterator[Both]:
    both = Both(request.param, service[1])
    yield both
    await both.close()


async def _webhook(url: str, job_id: str, status: str = "Completed", **metadata: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        response = await deliver(client, job_id, status=status, **metadata)
    assert response.status_code == 200, response.text


async def test_track_then_get_returns_typed_models(
    jobhook: Both, service: tuple[Starlette, str]
) -> None:
    job = await jobhook.track("reducto", "job-1", metadata={"batch": "42"}, pages=9)
    assert (job.source, job.job_id, job.state, job.terminal) == (
        "reducto",
        "job-1",
        "queued",
        False,
    )
    assert (job.metadata, job.expected_pages) == ({"batch": "42"}, 9)
    assert job.created_at.tzinfo is not None
    await _webhook(service[1], "job-1")
    detail = await jobhook.get("reducto", "job-1")
    assert (detail.job.state, detail.job.terminal, detail.job.succeeded) == (
        "succeeded",
        True,
        True,
    )
    assert [d.provider_status for d in detail.deliveries] == ["Completed"]
    assert detail.completion is not None
    assert detail.completion.state == "succeeded"
    assert [d.handler for d in detail.dispatches] == ["files"]


async def test_list_follows_the_cursor_across_pages_with_filters(
    jobhook: Both, service: tuple[Starlette, str]
) -> None:
    for n in range(5):
        await _webhook(service[1], f"j{n}", customer="acme" if n % 2 == 0 else "zen")
    await _webhook(service[1], "bad", status="Failed", customer="acme")
    every = await jobhook.list(page_size=2)
    assert [j.job_id for j in every] == ["bad", "j4", "j3", "j2", "j1", "j0"]
    acme = await jobhook.list(page_size=1, metadata={"customer": "acme"}, state="succeeded")
    assert [j.job_id for j in acme] == ["j4", "j2", "j0"]
    first = await jobhook.page(limit=4)
    assert len(first.jobs) == 4
    assert first.next_cursor is not None
    rest = await jobhook.page(limit=4, cursor=first.next_cursor)
    assert ([j.job_id for j in rest.jobs], rest.next_cursor) == (["j1", "j0"], None)
    future = datetime.now(UTC) + timedelta(hours=1)
    assert await jobhook.list(created_after=future) == []
    assert len(await jobhook.list(created_before=future.timestamp(), source="reducto")) == 6


async def test_wait_answers_when_the_webhook_arrives_with_the_progress_seen_before(
    jobhook: Both, service: tuple[Starlette, str]
) -> None:
    app, url = service
    await jobhook.track("reducto", "slow")
    await app.state.ingestor.ingest(Event("reducto", "slow", State.RUNNING, "InProgress", "poll",
                                          progress=Progress(3, 10)))  # fmt: skip
    waiting = asyncio.create_task(jobhook.wait("reducto", "slow", timeout=20, poll=0.3))
    await asyncio.sleep(0.8)  # several long-polls answered 202
    assert not waiting.done()
    await _webhook(url, "slow")
    detail = await asyncio.wait_for(waiting, 10)
    assert (detail.job.state, detail.job.terminal) == ("succeeded", True)
    again = await jobhook.wait("reducto", "slow", timeout=0)  # terminal already: no waiting
    assert again.job.state == "succeeded"


async def test_wait_gives_up_after_its_timeout_with_the_job_as_last_seen(jobhook: Both) -> None:
    await jobhook.track("reducto", "stuck")
    started = asyncio.get_running_loop().time()
    with pytest.raises(WaitTimeout) as caught:
        await jobhook.wait("reducto", "stuck", timeout=0.6, poll=0.2)
    assert 0.5 < asyncio.get_running_loop().time() - started < 5
    assert caught.value.last is not None
    assert caught.value.last.job.state == "queued"
    assert "reducto/stuck not terminal after 0.6 s (queued)" in str(caught.value)


async def test_events_yield_completions_after_the_given_id_and_none_before(
    jobhook: Both, service: tuple[Starlette, str]
) -> None:
    url = service[1]
    await _webhook(url, "before")
    before = (await jobhook.get("reducto", "before")).completion
    assert before is not None
    # From "before"'s id, however late the stream connects.
    listening = jobhook.events(2, heartbeat=0.2, last_event_id=before.id)
    await _webhook(url, "one", batch="7")
    await _webhook(url, "two", status="Failed")
    got = await asyncio.wait_for(listening, 10)
    assert [(c.job_id, c.state) for c in got] == [("one", "succeeded"), ("two", "failed")]
    assert got[0].metadata == {"batch": "7"}
    assert got[0].id < got[1].id
    resumed = await asyncio.wait_for(jobhook.events(2, last_event_id=0), 10)
    assert [c.job_id for c in resumed] == ["before", "one"]


async def test_replay_stats_and_export(jobhook: Both, service: tuple[Starlette, str]) -> None:
    url = service[1]
    await _webhook(url, "a", customer="acme")
    await _webhook(url, "b", status="Failed")
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client, asyncio.timeout(10):
        while (await client.get("/jobs/reducto/a")).json()["dispatches"][0]["state"] != "succeeded":
            await asyncio.sleep(0.05)
    assert await jobhook.replay("reducto", "a") == 0  # nothing dead
    assert await jobhook.replay("reducto", "a", include_succeeded=True) == 1
    assert await jobhook.replay("reducto", "a", handler="other", include_succeeded=True) == 0
    stats = await jobhook.stats("7d")
    assert (stats.period, stats.total, stats.by_state) == ("7d", 2, {"failed": 1, "succeeded": 1})
    assert stats.success_rate == pytest.approx(0.5)
    lines = (await jobhook.export(metadata={"customer": "acme"})).splitlines()
    assert [json.loads(line)["job_id"] for line in lines] == ["a"]
    csv = await jobhook.export(format="csv")
    assert csv.splitlines()[0].startswith("source,job_id,state")
    assert len(csv.splitlines()) == 3


async def test_status_is_the_document_jobhook_status_shows(jobhook: Both) -> None:
    await jobhook.track("reducto", "queued-1")
    status = await jobhook.status()
    assert status["status"] == "ready"
    assert status["store"]["backend"] == "sqlite"
    assert "reducto" in status["sources"]


def test_url_and_token_come_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBHOOK_URL", "http://jobhook.internal:8000/")
    monkeypatch.setenv("JOBHOOK_ADMIN_TOKEN", "env-token-123")
    with Client() as client:
        assert client.url == "http://jobhook.internal:8000"
        assert repr(client) == "Client(url='http://jobhook.internal:8000')"
        assert "env-token-123" not in repr(vars(client))
    with Client("http://other:1") as client:
        assert client.url == "http://other:1"
    monkeypatch.delenv("JOBHOOK_URL")
    with Client() as client:
        assert client.url == "http://127.0.0.1:8000"
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        Client("jobhook.internal:8000")
