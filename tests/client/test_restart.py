"""A ``jobhook serve`` process killed (``kill -9``) and started again on the same SQLite file
while clients wait and listen: ``wait`` returns the completion delivered after the restart, and
``events`` reconnects with ``Last-Event-ID``, yielding what came after it without repeats.

Both clients of each kind ride the same restart (a process start is seconds on a busy CI
machine): a sync ``wait`` and a sync ``events`` in threads, an async one of each in tasks.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.client import AsyncClient, Client
from tests.adminsupport import TOKEN, deliver
from tests.client.helpers import kill, ready, serve_config, start_serve, until
from tests.support import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.client import Completion, JobDetail

EXPECTED = ["one", "job-r", "two", "three"]


async def _deliver(url: str, job_id: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        response = await deliver(client, job_id)
    assert response.status_code == 200, response.text


# A restart on a busy machine (CI beside other work) can take over 15 s: the clients' patience
# must outlast it, or the test checks the machine's speed instead of the clients.
@pytest.mark.timeout(180)
async def test_wait_and_events_ride_out_a_kill_and_restart_of_the_service(tmp_path: Path) -> None:
    config, port = serve_config(tmp_path), free_port()
    url = f"http://127.0.0.1:{port}"
    service = start_serve(config, port)
    seen: dict[str, list[Completion]] = {"sync": [], "async": []}
    tasks: list[asyncio.Task[Any]] = []

    def wait_sync() -> JobDetail:
        with Client(url, TOKEN) as client:
            return client.wait("reducto", "job-r", timeout=90, poll=10)

    async def wait_async() -> JobDetail:
        async with AsyncClient(url, TOKEN) as client:
            return await client.wait("reducto", "job-r", timeout=90, poll=10)

    def listen_sync() -> None:
        with Client(url, TOKEN) as client:
            for completion in client.events(last_event_id=0, heartbeat=0.5, give_up_after=60):
                seen["sync"].append(completion)
                if len(seen["sync"]) == len(EXPECTED):
                    return

    async def listen_async() -> None:
        async with AsyncClient(url, TOKEN) as client:
            async for completion in client.events(last_event_id=0, heartbeat=0.5, give_up_after=60):
                seen["async"].append(completion)
                if len(seen["async"]) == len(EXPECTED):
                    return

    try:
        await ready(url)
        async with AsyncClient(url, TOKEN) as jobhook:
            await jobhook.track("reducto", "job-r")
        tasks += [
            asyncio.create_task(asyncio.to_thread(wait_sync)),
            asyncio.create_task(wait_async()),
            asyncio.create_task(asyncio.to_thread(listen_sync)),
            asyncio.create_task(listen_async()),
        ]
        await asyncio.sleep(0.5)  # the long-polls are open (the streams start from id 0)
        await _deliver(url, "one")
        await until(lambda: len(seen["sync"]) == len(seen["async"]) == 1)
        kill(service)
        await asyncio.sleep(0.3)  # connections refused meanwhile
        service = start_serve(config, port)
        await ready(url)
        assert not any(task.done() for task in tasks)
        # Perhaps before the listeners are back: Last-Event-ID finds them all the same.
        for job_id in EXPECTED[1:]:
            await _deliver(url, job_id)
        waited_sync, waited_async, _, _ = await asyncio.wait_for(asyncio.gather(*tasks), 20)
    finally:
        for task in tasks:
            task.cancel()
        kill(service)
    for detail in (waited_sync, waited_async):
        assert (detail.job.job_id, detail.job.state, detail.job.terminal) == (
            "job-r", "succeeded", True)  # fmt: skip
    for kind, completions in seen.items():
        assert [c.job_id for c in completions] == EXPECTED, kind
        assert [c.id for c in completions] == sorted({c.id for c in completions}), kind
