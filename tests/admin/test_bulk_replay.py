"""``POST /jobs/replay`` on a live service: 1,000 dead deliveries requeued by one filtered call
while webhooks keep being accepted (intake's rate before and during is printed), a dry run,
idempotence, and ``jobhook replay`` with filters."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.store.sqlite.store import SQLiteStore
from tests.adminsupport import AUTH, TOKEN, admin_settings
from tests.support import live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from receiver.config.settings import Settings

DEAD = 1000
WORKERS = 4  # the bounded loopback load: this many webhooks in flight at once


async def make_dead(settings: Settings, count: int, handler: str = "files") -> None:
    """``count`` succeeded jobs whose one delivery is dead, written before the service starts."""
    store = SQLiteStore(Path(settings.store.url.removeprefix("sqlite:///")))
    await store.open()
    try:
        events = [
            Event("reducto", f"dead-{n}", State.SUCCEEDED, "Completed", "webhook",
                  message_id=f"dead-{n}", metadata={"batch": "b1"})
            for n in range(count)
        ]  # fmt: skip
        await asyncio.gather(*(store.ingest(e, [handler], resolve=False) for e in events))
        now = time.time() + 1
        claimed = [d for d, _ in await store.claim_dispatches("prep", count, 60, now)]
        await asyncio.gather(*(
            store.finish_dispatch(d.id, "prep", error="down", next_attempt_at=None,
                                  error_code="http_5xx") for d in claimed))  # fmt: skip
    finally:
        await store.close()


async def load(url: str, stop: asyncio.Event, names: itertools.count[int]) -> tuple[int, int]:
    """Post signed webhooks from WORKERS clients until ``stop``; (accepted, other answers)."""
    accepted = other = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal accepted, other
        while not stop.is_set():
            job_id = f"live-{next(names)}"
            body = reducto_body(job_id)
            answer = await client.post("/webhooks/reducto", content=body,
                                       headers=signed_headers(body, msg_id=job_id))  # fmt: skip
            if answer.status_code == 200 and answer.json()["status"] == "accepted":
                accepted += 1
            else:
                other += 1

    async with httpx.AsyncClient(base_url=url) as client:
        await asyncio.gather(*(worker(client) for _ in range(WORKERS)))
    return accepted, other


async def test_a_thousand_dead_deliveries_are_requeued_while_intake_goes_on(
    tmp_path: Path,
) -> None:
    settings = admin_settings(tmp_path)
    await make_dead(settings, DEAD)
    names = itertools.count()
    async with (
        live_server(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as admin,
    ):
        filters = {"dispatch_state": "dead", "handler": "files", "metadata": ["batch:b1"],
                   "error_code": "http_5xx", "since": "0"}  # fmt: skip
        dry = (await admin.post("/jobs/replay", json={**filters, "dry_run": True})).json()
        assert dry == {"dry_run": True, "count": DEAD}

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        before = loop.create_task(load(url, stop, names))
        started = time.monotonic()
        await asyncio.sleep(1.0)
        stop.set()
        accepted_before, bad_before = await before
        rate_before = accepted_before / (time.monotonic() - started)

        stop = asyncio.Event()
        during = loop.create_task(load(url, stop, names))
        await asyncio.sleep(0.1)  # the load is running when the replay starts
        started = time.monotonic()
        answer = (await admin.post("/jobs/replay", json=filters)).json()
        replay_seconds = time.monotonic() - started
        await asyncio.sleep(max(0.0, 0.5 - replay_seconds))
        stop.set()
        accepted_during, bad_during = await during
        rate_during = accepted_during / (time.monotonic() - started + 0.1)
        again = (await admin.post("/jobs/replay", json=filters)).json()

    print(  # the measurement this test exists to show
        f"\nintake before the replay: {rate_before:.0f} webhooks/s; during it: "
        f"{rate_during:.0f} webhooks/s ({WORKERS} concurrent clients); {DEAD} requeued in "
        f"{replay_seconds:.3f} s"
    )
    assert answer["requeued"] == DEAD
    assert answer["next_cursor"] is None
    assert again["requeued"] == 0  # idempotent: they are no longer dead
    assert (bad_before, bad_during) == (0, 0)
    assert accepted_during > 0


async def test_jobhook_replay_with_filters_counts_then_requeues(tmp_path: Path) -> None:
    settings = admin_settings(tmp_path)
    await make_dead(settings, 30)
    async with live_server(create_app(settings)) as url:
        env = {"JOBHOOK_ADMIN_TOKEN": TOKEN, "JOBHOOK_URL": url, "JOBHOOK_CONFIG": None}

        async def cli(*args: str) -> str:
            result = await asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)
            assert result.exit_code == 0, result.output
            return result.stdout

        args = ("replay", "--state", "dead", "--handler", "files", "--since", "24h")
        assert "would requeue 30" in await cli(*args, "--dry-run")
        assert "requeued 30 delivery(ies)" in await cli(*args)
        assert "requeued 0 delivery(ies)" in await cli(*args)
        lonely = await asyncio.to_thread(CliRunner().invoke, main, ["replay", "reducto"], env=env)
        assert lonely.exit_code == 2
