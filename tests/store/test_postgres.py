"""What only the PostgreSQL store has to get right: many pools on one database, and outages."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.errors import StoreUnavailableError
from receiver.models import Event, State
from receiver.service.app import create_app
from receiver.store.postgres.migrations import POSTGRES_MIGRATIONS
from receiver.store.postgres.store import PostgresStore
from tests.services import POSTGRES_ADMIN_URL
from tests.support import SECRET, free_port, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.postgres


def done(job_id: str, msg: str) -> Event:
    return Event(source="reducto", job_id=job_id, state=State.SUCCEEDED,
                 provider_status="Completed", via="webhook", message_id=msg)  # fmt: skip


@contextlib.asynccontextmanager
async def stores(url: str, count: int) -> AsyncIterator[list[PostgresStore]]:
    """``count`` stores (pools) on one database, as replicas would have, opened together."""
    opened = [PostgresStore(url) for _ in range(count)]
    try:
        await asyncio.gather(*(s.open() for s in opened))
        yield opened
    finally:
        await asyncio.gather(*(s.close() for s in opened))


async def sql(url: str, query: str) -> list[Any]:
    """Run ``query`` on its own connection to ``url``; return its rows."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(query))
    finally:
        await conn.close()


async def test_replicas_opening_together_migrate_once(postgres_url: str) -> None:
    async with stores(postgres_url, 5):
        rows = await sql(postgres_url, "SELECT version FROM schema_migrations ORDER BY 1")

    assert [r[0] for r in rows] == list(range(1, len(POSTGRES_MIGRATIONS) + 1))
    async with stores(postgres_url, 1):  # reopening applies nothing again
        pass


async def test_one_message_raced_through_three_pools_is_accepted_once(postgres_url: str) -> None:
    async with stores(postgres_url, 3) as opened:
        results = await asyncio.gather(
            *(opened[n % 3].ingest(done("job-1", "msg-1"), ["a", "b"]) for n in range(200))
        )
        dispatches = await opened[0].dispatches_for("reducto", "job-1")
    assert sorted(r.status for r in results).count("accepted") == 1
    assert sum(r.completed for r in results) == 1
    assert [d.handler for d in dispatches] == ["a", "b"]


async def test_one_job_raced_under_many_message_ids_completes_once(postgres_url: str) -> None:
    async with stores(postgres_url, 3) as opened:
        results = await asyncio.gather(
            *(opened[n % 3].ingest(done("job-1", f"msg-{n}"), ["a"]) for n in range(60))
        )
        completions = await opened[0].completions_after(0, 10)
    assert {r.status for r in results} == {"accepted"}
    assert sum(r.completed for r in results) == 1
    assert len(completions) == 1


async def test_replicas_claiming_together_never_claim_the_same_dispatch(postgres_url: str) -> None:
    async with stores(postgres_url, 3) as opened:
        for n in range(60):
            await opened[0].ingest(done(f"job-{n}", f"msg-{n}"), ["a"], resolve=False)
        now = time.time() + 1

        async def drain(store: PostgresStore, owner: str) -> list[int]:
            taken: list[int] = []
            while batch := await store.claim_dispatches(owner, 4, 60, now):
                taken += [d.id for d, _ in batch]
            return taken

        claims = await asyncio.gather(*(drain(s, f"w{n}") for n, s in enumerate(opened)))
    everything = [i for taken in claims for i in taken]
    assert len(everything) == 60
    assert len(set(everything)) == 60
    assert all(claims), "every replica should have won some of the work"


async def test_an_unreachable_server_fails_open_without_showing_the_password() -> None:
    store = PostgresStore(f"postgresql://jobhook:hunter2@127.0.0.1:{free_port()}/jobhook")
    with pytest.raises(StoreUnavailableError) as caught:
        await store.open()
    assert "hunter2" not in str(caught.value)
    assert "hunter2" not in repr(store)
    assert "jobhook:***@127.0.0.1" in repr(store)
    in_query = PostgresStore("postgresql://jobhook@db/jobhook?password=hunter3&sslmode=require")
    assert "hunter3" not in repr(in_query)


async def test_a_database_that_refuses_connections_answers_503_then_recovers(
    postgres_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[store]
url = "{postgres_url}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
"""
    )
    name = postgres_url.rsplit("/", 1)[1]
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.get("/readyz")).status_code == 200
        await sql(POSTGRES_ADMIN_URL, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await sql(
            POSTGRES_ADMIN_URL,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'",
        )
        body = reducto_body("job-down")
        try:
            down = await client.post(
                "/webhooks/reducto", content=body, headers=signed_headers(body)
            )
            ready = await client.get("/readyz")
        finally:
            await sql(POSTGRES_ADMIN_URL, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        assert (down.status_code, ready.status_code) == (503, 503)
        assert down.headers["retry-after"]
        again = await client.post("/webhooks/reducto", content=body, headers=signed_headers(body))
        assert (again.status_code, again.json()["status"]) == (200, "accepted")
        assert (await client.get("/readyz")).status_code == 200


async def test_the_completion_stream_misses_none_while_replicas_commit_concurrently(
    postgres_url: str,
) -> None:
    async with stores(postgres_url, 4) as opened:
        writers, reader = opened[:3], opened[3]
        finished = asyncio.Event()
        seen: list[int] = []

        async def follow() -> None:
            after = 0
            while True:
                last_pass = finished.is_set()
                for row in await reader.completions_after(after, 1000):
                    seen.append(row.id)
                    after = row.id
                if last_pass:
                    return

        async def write() -> None:
            await asyncio.gather(
                *(writers[n % 3].ingest(done(f"job-{n}", f"m-{n}"), ["a"]) for n in range(300))
            )
            finished.set()

        await asyncio.gather(follow(), write())
        every = [row.id for row in await reader.completions_after(0, 1000)]
    assert len(every) == 300
    assert seen == every, f"the stream skipped {sorted(set(every) - set(seen))}"
