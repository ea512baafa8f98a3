"""Long-poll (``/wait``) and server-sent events (``/events``) with real timing."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.store.sqlite.store import SQLiteStore
from tests.adminsupport import AUTH, admin_settings, deliver
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from receiver.config.settings import Settings

PROMPT = 0.6  # well under the 1 s store recheck: the answer came from the notifier


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return admin_settings(tmp_path)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
        yield c


async def _timed_wait(client: httpx.AsyncClient, job_id: str, timeout: float) -> httpx.Response:
    return await client.get(
        f"/jobs/reducto/{job_id}/wait", params={"timeout": timeout}, timeout=timeout + 10
    )


async def test_wait_returns_as_soon_as_the_webhook_arrives(client: httpx.AsyncClient) -> None:
    await deliver(client, "job-1", status="Pending")
    waiting = asyncio.create_task(_timed_wait(client, "job-1", 30))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    sent = time.monotonic()
    await deliver(client, "job-1")
    response = await waiting
    assert time.monotonic() - sent < PROMPT
    assert response.status_code == 200
    assert response.json()["job"]["state"] == "succeeded"


async def test_wait_on_a_terminal_job_answers_at_once(client: httpx.AsyncClient) -> None:
    await deliver(client, "job-1", status="Failed")
    started = time.monotonic()
    response = await _timed_wait(client, "job-1", 30)
    assert time.monotonic() - started < PROMPT
    assert (response.status_code, response.json()["job"]["state"]) == (200, "failed")


async def test_wait_times_out_with_202_and_the_job_as_it_stands(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/jobs", json={"source": "reducto", "job_id": "job-1"})
    started = time.monotonic()
    response = await _timed_wait(client, "job-1", 0.4)
    assert 0.4 <= time.monotonic() - started < 3
    assert (response.status_code, response.json()["job"]["state"]) == (202, "queued")


async def test_wait_sees_a_change_committed_by_another_replica(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    await deliver(client, "job-1", status="Pending")
    waiting = asyncio.create_task(_timed_wait(client, "job-1", 30))
    await asyncio.sleep(0.2)
    other = SQLiteStore(Path(settings.store.url.removeprefix("sqlite:///")))
    await other.open()
    try:
        event = Event("reducto", "job-1", State.SUCCEEDED, "Completed", "webhook", "elsewhere")
        await other.ingest(event, ["files"])
    finally:
        await other.close()
    sent = time.monotonic()
    response = await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - sent < 2.5  # the 1 s recheck, with room for a slow machine
    assert response.json()["job"]["state"] == "succeeded"


@pytest.mark.parametrize(
    ("path", "status"),
    [("/jobs/reducto/nope/wait", 404), ("/jobs/reducto/nope/wait?timeout=-1", 400),
     ("/jobs/reducto/nope/wait?timeout=301", 400), ("/jobs/reducto/nope/wait?timeout=nan", 400)],
    ids=["unknown-job", "negative", "too-long", "nan"],
)  # fmt: skip
async def test_wait_refuses_unknown_jobs_and_bad_timeouts(
    client: httpx.AsyncClient, path: str, status: int
) -> None:
    assert (await client.get(path)).status_code == status


class EventReader:
    """Reads ``text/event-stream`` frames: events (id, event, data) and comment lines."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines = response.aiter_lines()
        self.comments: list[str] = []

    async def next_event(self, seconds: float = 5.0) -> dict[str, Any]:
        frame: dict[str, Any] = {}
        async with asyncio.timeout(seconds):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                elif line == "" and "data" in frame:
                    return frame
                elif line:
                    field, _, value = line.partition(": ")
                    frame[field] = json.loads(value) if field == "data" else value
        raise AssertionError("the stream ended")

    async def next_comment(self, seconds: float = 5.0) -> str:
        async with asyncio.timeout(seconds):
            async for line in self._lines:
                if line.startswith(":"):
                    return line[1:].strip()
        raise AssertionError("the stream ended")


async def test_events_stream_completions_as_they_are_committed(
    client: httpx.AsyncClient,
) -> None:
    await deliver(client, "before")  # the stream starts after what already exists
    async with client.stream("GET", "/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        reader = EventReader(response)
        await deliver(client, "job-1", status="Pending")  # not a completion
        sent = time.monotonic()
        await deliver(client, "job-1", tier="gold")
        first = await reader.next_event()
        assert time.monotonic() - sent < PROMPT
        await deliver(client, "job-2", status="Failed")
        second = await reader.next_event()
    assert first["event"] == "completion"
    assert first["data"]["job_id"] == "job-1"
    assert first["data"]["state"] == "succeeded"
    assert first["data"]["metadata"] == {"tier": "gold"}
    assert first["data"]["trace_id"] is None  # tracing is off
    assert int(second["id"]) > int(first["id"]) == first["data"]["id"]
    assert (second["data"]["job_id"], second["data"]["state"]) == ("job-2", "failed")


async def test_events_resume_after_last_event_id_without_gaps_or_repeats(
    client: httpx.AsyncClient,
) -> None:
    async with client.stream("GET", "/events") as response:
        reader = EventReader(response)
        await deliver(client, "a")
        seen = await reader.next_event()
    for job_id in ("b", "c"):  # completed while the client was away
        await deliver(client, job_id)
    headers = {"Last-Event-ID": seen["id"]}
    async with client.stream("GET", "/events", headers=headers) as response:
        reader = EventReader(response)
        missed = [await reader.next_event(), await reader.next_event()]
        await deliver(client, "d")
        live = await reader.next_event()
    assert [e["data"]["job_id"] for e in [*missed, live]] == ["b", "c", "d"]
    replayed = await client.get("/events", params={"last_event_id": "x"})
    assert replayed.status_code == 400


async def test_events_send_heartbeats_while_idle(client: httpx.AsyncClient) -> None:
    async with client.stream("GET", "/events", params={"heartbeat": 0.2}) as response:
        reader = EventReader(response)
        started = time.monotonic()
        beats = [await reader.next_comment() for _ in range(4)]
    assert beats[0].startswith("stream of completions")
    assert beats[1:] == ["heartbeat"] * 3
    assert 0.5 <= time.monotonic() - started < 3
