"""Helpers of the admin API, CLI, metrics and retention tests: configs, stores, webhooks."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

import httpx
import time_machine

from receiver.config.load import load_settings
from receiver.models import Event, State
from receiver.store.sqlite.store import SQLiteStore
from tests.support import SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.config.settings import Settings
    from receiver.store import Store

TOKEN = "admin-token-5a1c9e0f7b"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def admin_settings(tmp_path: Path, *, token: str | None = TOKEN, extra: str = "") -> Settings:
    """One Reducto source (no job API), a file handler, and the admin token (unless None)."""
    server = f'[server]\nadmin_token = "{token}"\n' if token else ""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
{server}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]

[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
{extra}
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


SECRETS = {"viewer": "read-secret-0c9d", "pipeline": "track-secret-77ab",
           "ops": "operate-secret-5e21", "boss": "admin-secret-9f03"}  # fmt: skip
ROLES = {"viewer": "read", "pipeline": "track", "ops": "operate", "boss": "admin"}


def token_config(tmp_path: Path, *, store: str = "", extra_server: str = "") -> Path:
    """One Reducto source, a file handler and four named tokens, one of each role."""
    tokens = "".join(
        f'[[server.tokens]]\nname = "{name}"\nrole = "{ROLES[name]}"\nsecrets = ["{secret}"]\n'
        for name, secret in SECRETS.items()
    )
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
{extra_server}
{f'[store]{chr(10)}url = "{store}"' if store else ""}
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
{tokens}
""",
        encoding="utf-8",
    )
    return config


async def deliver(
    client: httpx.AsyncClient,
    job_id: str,
    *,
    msg_id: str | None = None,
    status: str = "Completed",
    **metadata: Any,
) -> httpx.Response:
    """POST a Reducto webhook signed with the real svix signer."""
    body = reducto_body(job_id, status, **metadata)
    headers = signed_headers(body, msg_id=msg_id or f"msg-{job_id}-{status}")
    return await client.post("/webhooks/reducto", content=body, headers=headers)


@contextlib.asynccontextmanager
async def open_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "store.db")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def record(
    store: Store,
    job_id: str,
    state: State = State.SUCCEEDED,
    *,
    at: float | None = None,
    source: str = "reducto",
    handlers: tuple[str, ...] = ("files",),
    resolve: bool = False,
    message_id: str | None = None,
    **metadata: Any,
) -> None:
    """Ingest one event straight into the store, at time ``at`` when given."""
    event = Event(
        source=source,
        job_id=job_id,
        state=state,
        provider_status=state.value,
        via="webhook",
        message_id=message_id or f"m-{source}-{job_id}-{state.value}",
        metadata=metadata,
    )
    if at is None:
        await store.ingest(event, handlers, resolve=resolve)
        return
    with time_machine.travel(at, tick=False):
        await store.ingest(event, handlers, resolve=resolve)


TEAM = {"Authorization": "Bearer team-secret-4b1d"}
BOSS = {"Authorization": "Bearer boss-secret-9e77"}


def sources_config(
    tmp_path: Path, store: str = "", team_sources: str = '["docs"]', extra: str = ""
) -> Path:
    """Two sources of one provider (docs, billing), a file handler, and two admin tokens:
    "team" limited to ``team_sources``, "boss" of every source (headers ``TEAM``, ``BOSS``)."""
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
{f'[store]{chr(10)}url = "{store}"' if store else ""}
[sources.docs]
provider = "reducto"
secrets = ["{SECRET}"]
[sources.billing]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
[[server.tokens]]
name = "team"
role = "admin"
secrets = ["team-secret-4b1d"]
sources = {team_sources}
[[server.tokens]]
name = "boss"
role = "admin"
secrets = ["boss-secret-9e77"]
{extra}
""",
        encoding="utf-8",
    )
    return config


async def deliver_to(c: httpx.AsyncClient, source: str, job_id: str) -> None:
    """Deliver a Reducto webhook finishing ``job_id`` to ``source``'s URL."""
    body = reducto_body(job_id, "Completed")
    headers = signed_headers(body, msg_id=f"msg-{source}-{job_id}")
    assert (await c.post(f"/webhooks/{source}", content=body, headers=headers)).status_code == 200


async def inject_fault(store: Store, table: str, event: str, when: str) -> None:
    """Make the database refuse an ``event`` (INSERT or UPDATE) of ``table`` rows for which
    ``when`` (SQL over ``NEW``, in both dialects) holds: a trigger raising inside the writing
    transaction, so whatever the transaction did with it is rolled back, as any failed
    statement's would be."""
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            conn.execute(f"""CREATE TRIGGER fault_{table} BEFORE {event} ON {table}
                WHEN {when} BEGIN SELECT RAISE(ABORT, 'injected fault'); END""")
            conn.commit()
        finally:
            conn.close()
        return
    function = f"""CREATE FUNCTION fault_{table}() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$"""
    trigger = f"""CREATE TRIGGER fault_{table} BEFORE {event} ON {table}
        FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION fault_{table}()"""

    async def create(conn: Any) -> None:
        await conn.execute(function)
        await conn.execute(trigger)

    pool = store.connector._db  # type: ignore[attr-defined]  # reaches past the store's API
    await pool.transaction(create)
