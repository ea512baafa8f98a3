"""The benchmark's loader and workload generator, on small numbers (the benchmark itself is not
a test): the rows a month leaves, kept and reused; the webhook mix; signatures svix accepts."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from datetime import UTC, datetime
from itertools import islice, pairwise
from typing import TYPE_CHECKING

import pytest
from ksuid import KsuidMs
from svix.webhooks import Webhook

from bench import prefill, signing, workload
from receiver.models import Event, State
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS
from receiver.store.sqlite.store import SQLiteStore
from tests.services import postgres_database
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
BASE62_24 = re.compile(r"^[0-9A-Za-z]{24}$")
MESSAGE = re.compile(r"^msg_[0-9A-Za-z]{27}$")


def _count(db: Path, query: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(query).fetchone()[0])


def test_prefill_makes_a_month_of_rows_on_the_current_schema_and_reuses_them(
    tmp_path: Path,
) -> None:
    db = prefill.ensure_prefilled(tmp_path, 4000)
    assert db == tmp_path / "jobhook-4000.db"
    assert _count(db, "PRAGMA user_version") == len(SQLITE_MIGRATIONS)
    assert _count(db, "SELECT count(*) FROM jobs") == 4000
    terminal = _count(db, "SELECT count(*) FROM jobs WHERE terminal_at IS NOT NULL")
    assert 0.93 < terminal / 4000 < 0.97
    assert _count(db, "SELECT count(*) FROM completions") == terminal
    assert _count(db, "SELECT count(*) FROM dispatches") == terminal
    dead = _count(db, "SELECT count(*) FROM dispatches WHERE state = 'dead'")
    assert 0.015 < dead / terminal < 0.045
    assert _count(db, "SELECT count(*) FROM deliveries") > 4000
    span = _count(db, "SELECT max(created_at) - min(created_at) FROM jobs")
    assert 29 * 86400 < span <= 30 * 86400
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT job_id FROM jobs")]
        messages = [r[0] for r in conn.execute("SELECT message_id FROM deliveries")]
    uuids = sum(bool(UUID4.match(i)) for i in ids)
    assert uuids + sum(bool(BASE62_24.match(i)) for i in ids) == len(ids)
    assert 0.4 < uuids / len(ids) < 0.6
    assert all(MESSAGE.match(m) for m in messages)
    stamp = db.stat().st_mtime_ns
    assert prefill.ensure_prefilled(tmp_path, 4000) == db
    assert db.stat().st_mtime_ns == stamp  # kept, not loaded again
    # jobhook opens it as it is, and a retry of a stored message is a duplicate.
    with sqlite3.connect(db) as conn:
        message, job = conn.execute("SELECT message_id, job_id FROM deliveries").fetchone()
    event = Event("reducto", job, State.SUCCEEDED, "Completed", "webhook", message)
    assert asyncio.run(_ingest(prefill.copy_store(db, tmp_path / "copy.db"), event)) == "duplicate"


async def _ingest(db: Path, event: Event) -> str:
    store = SQLiteStore(db)
    await store.open()
    try:
        return (await store.ingest(event, [])).status
    finally:
        await store.close()


def test_prefilled_message_ids_are_svix_ksuids_of_their_delivery_in_time_order(
    tmp_path: Path,
) -> None:
    db = prefill.ensure_prefilled(tmp_path, 3000)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT message_id, received_at FROM deliveries").fetchall()
    stamps = {m: KsuidMs.from_base62(m.removeprefix("msg_")).timestamp for m, _ in rows}
    assert all(abs(stamps[m] - at) < 0.005 for m, at in rows)  # the 4 ms step, and rounding
    by_id = [at for _, at in sorted(rows)]
    assert all(b > a - 0.005 for a, b in pairwise(by_id))
    span = max(at for _, at in rows) - min(at for _, at in rows)
    assert span > 29 * 86400  # ordered over the month


def test_random_message_ids_get_a_store_of_their_own(tmp_path: Path) -> None:
    db = prefill.ensure_prefilled(tmp_path, 2000, "random")
    assert db == tmp_path / "jobhook-2000-random-ids.db"
    assert prefill.is_current(db, 2000, "random")
    assert not prefill.is_current(db, 2000)  # not a store of KSUIDs
    with sqlite3.connect(db) as conn:
        messages = [r[0].removeprefix("msg_") for r in conn.execute(
            "SELECT message_id FROM deliveries ORDER BY received_at")]  # fmt: skip
    assert all(MESSAGE.match("msg_" + m) for m in messages)
    assert len({m[0] for m in messages}) > 50  # random, not a time's prefix
    assert messages != sorted(messages)


def test_a_store_of_another_schema_or_size_is_loaded_again(tmp_path: Path) -> None:
    db = prefill.ensure_prefilled(tmp_path / "s.db", 500)
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {len(SQLITE_MIGRATIONS) - 1}")
    assert not prefill.is_current(db, 500)
    prefill.ensure_prefilled(db, 500)
    assert prefill.is_current(db, 500)
    assert not prefill.is_current(db, 600)


@pytest.mark.postgres
async def test_postgres_prefill_loads_the_same_rows() -> None:
    asyncpg = pytest.importorskip("asyncpg")
    from bench import prefill_pg

    async with postgres_database() as url:
        await prefill_pg.load(url, 1500)
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM jobs") == 1500
            completions = await conn.fetchval("SELECT count(*) FROM completions")
            assert await conn.fetchval("SELECT count(*) FROM dispatches") == completions
            assert await conn.fetchval("SELECT max(id) FROM completions") == completions
        finally:
            await conn.close()


def test_the_realistic_workload_mixes_retries_updates_and_random_ids() -> None:
    hooks = list(islice(workload.realistic(1), 20_000))
    kinds = {k: sum(h.kind == k for h in hooks) / len(hooks) for k in ("retry", "processing")}
    assert 0.04 < kinds["retry"] < 0.06
    assert 0.08 < kinds["processing"] < 0.12
    seen: dict[str, workload.Webhook] = {}
    updated: set[str] = set()
    for hook in hooks:
        assert MESSAGE.match(hook.message_id)
        assert UUID4.match(hook.job_id) or BASE62_24.match(hook.job_id)
        data = json.loads(hook.body)
        assert data["job_id"] == hook.job_id
        assert data["metadata"]
        if hook.kind == "retry":
            assert seen[hook.message_id].body == hook.body  # Svix sends the same message again
            continue
        assert hook.message_id not in seen
        seen[hook.message_id] = hook
        if hook.kind == "processing":
            assert data["status"] == "InProgress"
            updated.add(hook.job_id)
        else:
            assert data["status"] in ("Completed", "Failed")
    finals = {h.job_id for h in hooks if h.kind == "new"}
    assert len(updated & finals) > 0.8 * len(updated)  # most updates get their terminal event


def test_requests_are_signed_as_svix_verifies_them(tmp_path: Path) -> None:
    kinds = signing.write_requests(tmp_path / "req", "t", 300, 2, "realistic")
    assert sum(kinds.values()) == 300
    lines = [*(tmp_path / "req.0").read_text().splitlines(),
             *(tmp_path / "req.1").read_text().splitlines()]  # fmt: skip
    assert len(lines) == 300
    webhook = Webhook(SECRET)
    for line in lines[:50]:
        message_id, ts, signature, body = line.split("\t")
        headers = {"svix-id": message_id, "svix-timestamp": ts, "svix-signature": signature}
        webhook.verify(body, headers)  # raises on a bad signature
        assert signature == webhook.sign(message_id, datetime.fromtimestamp(int(ts), UTC), body)
