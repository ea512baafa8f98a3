"""A store made by the schema before one random key per webhook (SQLite 12, PostgreSQL 11), a
month of traffic, upgraded in place when jobhook opens it: every row kept and linked to its job
by jobhook's new id, and the answers the admin API gives the same as before.

The old stores are written by SQL in the old schema's shape (what that version's statements
stored: jobs keyed by the provider's (source, job_id), and everything per job by that key). The
default run upgrades 20,000 jobs, enough for the planner to choose the indexes it chooses on a
big store (tests/store/test_plans.py holds those plans); the million-job stores whose upgrade
times docs/deployment.md gives run under the ``reliability`` marker
(``pytest -m reliability tests/store/test_upgrade.py -s``). ``JOBHOOK_UPGRADE_JOBS`` sets the
big size; the time each upgrade took is printed (``-s``) and logged by the store
(``store_migrated seconds=...``)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from receiver.models import Event, State
from receiver.store.postgres.migrations import _CREATE_VERSIONS, POSTGRES_MIGRATIONS
from receiver.store.postgres.store import PostgresStore
from receiver.store.rows import JobFilter
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS, statements
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from receiver.store import Store

SIZES = [
    pytest.param(20_000, id="20k"),
    pytest.param(
        int(os.environ.get("JOBHOOK_UPGRADE_JOBS", "1000000")),
        id="big",
        marks=[pytest.mark.reliability, pytest.mark.timeout(900)],
    ),
]
"""The default run's store, and the opt-in big one."""
DAY = 86_400.0
NOW = 1_790_000_000.0  # a fixed clock: the rows, and so the answers, are the same every run

# One job per row of ``n``: created over 30 days in order, job ids random (the provider's),
# message ids time-ordered, 89 % succeeded, 5 % failed, 1 % cancelled, the rest in flight;
# every eighth job had an InProgress update before its end. ``?1`` is the job count.
_N = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)"
_STATE = """CASE WHEN i % 100 < 89 THEN 'succeeded' WHEN i % 100 < 94 THEN 'failed'
    WHEN i % 100 < 95 THEN 'cancelled' WHEN i % 100 < 97 THEN 'running' ELSE 'queued' END"""
_CREATED = f"({NOW} - 30 * {DAY} + i * 30 * {DAY} / ?1)"
OLD_SQLITE_ROWS = (
    f"""{_N} INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
        error_code, created_at, updated_at, last_news_at, terminal_at, progress_done,
        progress_total)
    SELECT 'reducto', lower(hex(randomblob(16))), {_STATE}, 'Completed',
           '{{"tenant":"t-' || (i % 97) || '","pipeline":"invoices"}}',
           CASE WHEN i % 100 BETWEEN 89 AND 93 THEN 'file is encrypted' END,
           CASE WHEN i % 100 BETWEEN 89 AND 93 THEN 'DOCUMENT_CORRUPT' END,
           {_CREATED}, {_CREATED} + 60, {_CREATED} + 60,
           CASE WHEN i % 100 < 95 THEN {_CREATED} + 60 END, i % 200, 200
    FROM n""",
    """INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at)
    SELECT source, 'msg_' || printf('%027d', rowid * 2), job_id, state, provider_status,
           updated_at FROM jobs""",
    """INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at)
    SELECT source, 'msg_' || printf('%027d', rowid * 2 + 1), job_id, 'running', 'InProgress',
           created_at + 1 FROM jobs WHERE rowid % 8 = 0""",
    """INSERT INTO completions (source, job_id, state, provider_status, metadata, error,
        error_code, created_at, next_attempt_at, phase, result_path, result_bytes, attempts,
        resolved_at, confidence)
    SELECT source, job_id, state, provider_status, metadata, error, error_code, terminal_at,
           terminal_at, CASE WHEN rowid % 1000 = 0 THEN 'resolving' ELSE 'ready' END,
           CASE WHEN state = 'succeeded' THEN 'results/' || job_id || '.json' END,
           CASE WHEN state = 'succeeded' THEN rowid % 100000 END, 1, terminal_at + 2,
           CASE WHEN state = 'succeeded' THEN 0.9 END
    FROM jobs WHERE terminal_at IS NOT NULL ORDER BY rowid""",
    """INSERT INTO dispatches (completion_id, handler, state, attempts, next_attempt_at,
        last_error, error_code, updated_at, finished_at)
    SELECT id, 'archive', CASE WHEN id % 33 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
           created_at + 3, CASE WHEN id % 33 = 0 THEN 'HTTP 503' END,
           CASE WHEN id % 33 = 0 THEN 'http_5xx' END, created_at + 3, created_at + 3
    FROM completions WHERE phase = 'ready'""",
    """INSERT INTO job_fields (completion_id, field, source, created_at, confidence, value)
    SELECT id, 'total', source, created_at, 0.5 + (id % 50) / 100.0, '12.00'
    FROM completions WHERE id % 10 = 0""",
)

# Every row of the old tables as the admin API sees it, by the provider's keys (the
# completion and deliveries of each job joined as the old schema joined them).
SNAPSHOT = (
    """SELECT source, job_id, state, metadata, created_at, terminal_at, error_code FROM jobs
    ORDER BY created_at, source, job_id""",
    """SELECT source, message_id, job_id, state, received_at FROM deliveries
    ORDER BY source, message_id""",
    """SELECT c.id, c.source, c.job_id, c.state, c.phase, c.result_path, d.handler, d.state
    FROM completions c JOIN dispatches d ON d.completion_id = c.id ORDER BY c.id""",
    "SELECT completion_id, field, confidence FROM job_fields ORDER BY completion_id, field",
)


def _digest(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    digests = []
    for query in SNAPSHOT:
        h, count = hashlib.sha256(), 0
        for row in conn.execute(query):
            h.update(repr(row).encode())
            count += 1
        digests.append((count, h.hexdigest()))
    return digests


def _old_sqlite_store(db: Path, jobs: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN")
        for script in SQLITE_MIGRATIONS[:12]:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute("PRAGMA user_version=12")
        for statement in OLD_SQLITE_ROWS:
            conn.execute(statement, (jobs,) if "?1" in statement else ())
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


# The rows whose job id (jobhook's, new) is not the job their provider's keys name.
UNLINKED = (
    """SELECT count(*) FROM deliveries d LEFT JOIN jobs j ON j.id = d.job
    WHERE j.id IS NULL OR j.source <> d.source OR j.job_id <> d.job_id""",
    """SELECT count(*) FROM completions c LEFT JOIN jobs j ON j.id = c.job
    WHERE j.id IS NULL OR j.source <> c.source OR j.job_id <> c.job_id""",
)

# What the admin API answered on the old schema, by the old schema's keys: the newest jobs,
# the newest failed ones, the week's states, and per sampled job its completion, deliveries
# and dispatches.
OLD_ANSWERS = (
    "SELECT job_id FROM jobs ORDER BY created_at DESC, source DESC, job_id DESC LIMIT 50",
    """SELECT job_id FROM jobs WHERE state = 'failed'
    ORDER BY created_at DESC, source DESC, job_id DESC LIMIT 20""",
    "SELECT state, count(*) FROM jobs WHERE created_at >= ?1 GROUP BY state ORDER BY state",
)
OLD_PER_JOB = (
    "SELECT id, state, phase FROM completions WHERE source = ?1 AND job_id = ?2",
    """SELECT message_id FROM deliveries WHERE source = ?1 AND job_id = ?2
    ORDER BY received_at, message_id""",
    """SELECT d.handler, d.state FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.source = ?1 AND c.job_id = ?2 ORDER BY d.handler""",
)
WEEK = NOW - 7 * DAY


def _old_answers(conn: sqlite3.Connection, sample: list[tuple[str, str]]) -> list[Any]:
    lists = [[r[0] for r in conn.execute(q, (WEEK,) if "?1" in q else ())]
             for q in OLD_ANSWERS[:2]]  # fmt: skip
    out: list[Any] = [*lists, dict(conn.execute(OLD_ANSWERS[2], (WEEK,)).fetchall())]
    for key in sample:
        completion, deliveries, dispatches = (conn.execute(q, key).fetchall() for q in OLD_PER_JOB)
        out.append((completion[0] if completion else None, [r[0] for r in deliveries],
                    [tuple(r) for r in dispatches]))  # fmt: skip
    return out


async def _answers(store: Store, sample: list[tuple[str, str]]) -> list[Any]:
    """The same answers from the store's own reads."""
    out: list[Any] = [
        [j.job.job_id for j in await store.list_jobs(JobFilter(), limit=50)],
        [j.job.job_id for j in await store.list_jobs(JobFilter(state="failed"), limit=20)],
        (await store.job_stats(WEEK)).by_state,
    ]
    for source, job_id in sample:
        c = await store.completion_for(source, job_id)
        out.append((
            c and (c.id, str(c.state), c.phase),
            [d.message_id for d in await store.deliveries_for(source, job_id)],
            [(d.handler, d.state) for d in await store.dispatches_for(source, job_id)],
        ))  # fmt: skip
    return out


@pytest.mark.parametrize("jobs", SIZES)
def test_an_old_sqlite_store_upgrades_in_place_keeping_every_row(tmp_path: Path, jobs: int) -> None:
    import asyncio

    db = tmp_path / "old.db"
    started = time.perf_counter()
    _old_sqlite_store(db, jobs)
    made = time.perf_counter() - started
    with sqlite3.connect(db) as conn:
        before = _digest(conn)
        sample = conn.execute(
            "SELECT source, job_id FROM jobs WHERE rowid % (?1 / 7) = 1 OR rowid >= ?1 - 3",
            (jobs,),
        ).fetchall()
        expected = _old_answers(conn, sample)
        running = conn.execute("SELECT source, job_id FROM jobs WHERE state = 'running' "
                               "ORDER BY rowid DESC LIMIT 1").fetchone()  # fmt: skip
    assert before[0][0] == jobs

    async def upgrade() -> tuple[float, list[Any], list[str]]:
        store = SQLiteStore(db)
        started = time.perf_counter()
        await store.open()
        took = time.perf_counter() - started
        try:
            with sqlite3.connect(db) as conn:  # the store as migrated, before any new write
                assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SQLITE_MIGRATIONS)
                assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
                assert [conn.execute(q).fetchone()[0] for q in UNLINKED] == [0, 0]
                assert _digest(conn) == before
            answers = await _answers(store, sample)
            seen = _event(sample[-1], f"msg_{2 * jobs:027d}")  # its terminal delivery, again
            news = _event(running, "msg_new")
            results = [await store.ingest(e, ["archive"]) for e in (seen, news, news)]
            done = await store.completion_for(*running)
            assert done is not None
            return took, answers, [r.status for r in results] + [str(done.state)]
        finally:
            await store.close()

    took, answers, outcomes = asyncio.run(upgrade())
    print(f"\nSQLite: {jobs:,} jobs made in {made:.1f} s, upgraded in {took:.1f} s")
    assert answers == expected
    assert outcomes == ["duplicate", "accepted", "duplicate", "succeeded"]
    with sqlite3.connect(db) as conn:
        assert [conn.execute(q).fetchone()[0] for q in UNLINKED] == [0, 0]
    assert Path(f"{db}-wal").stat().st_size < 64 * 1024 * 1024  # started over after the upgrade


def _event(key: tuple[str, str], message_id: str) -> Event:
    return Event(source=key[0], job_id=key[1], state=State.SUCCEEDED, provider_status="Completed",
                 via="webhook", message_id=message_id)  # fmt: skip


# PostgreSQL 11's shape, the same month generated by the server: ``$1`` is the job count.
_PG_CREATED = f"({NOW} - 30 * {DAY} + i * 30 * {DAY} / $1)"
_PG_STATE = _STATE.replace("i % 100", "(i % 100)")
OLD_PG_ROWS = (
    f"""INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, error_code,
        created_at, updated_at, last_news_at, terminal_at, progress_done, progress_total)
    SELECT 'reducto', md5(random()::text || i), {_PG_STATE}, 'Completed',
           jsonb_build_object('tenant', 't-' || (i % 97), 'pipeline', 'invoices'),
           CASE WHEN i % 100 BETWEEN 89 AND 93 THEN 'file is encrypted' END,
           CASE WHEN i % 100 BETWEEN 89 AND 93 THEN 'DOCUMENT_CORRUPT' END,
           {_PG_CREATED}, {_PG_CREATED} + 60, {_PG_CREATED} + 60,
           CASE WHEN i % 100 < 95 THEN {_PG_CREATED} + 60 END, i % 200, 200
    FROM generate_series(1, $1::bigint) AS i""",
    """INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at)
    SELECT source, 'msg_' || lpad((row_number() OVER (ORDER BY created_at) * 2)::text, 27, '0'),
           job_id, state, provider_status, updated_at FROM jobs""",
    """INSERT INTO completions (source, job_id, state, provider_status, metadata, error,
        error_code, created_at, next_attempt_at, phase, result_path, attempts, resolved_at)
    SELECT source, job_id, state, provider_status, metadata, error, error_code, terminal_at,
           terminal_at, 'ready',
           CASE WHEN state = 'succeeded' THEN 'results/' || job_id || '.json' END, 1,
           terminal_at + 2
    FROM jobs WHERE terminal_at IS NOT NULL ORDER BY created_at""",
    """INSERT INTO dispatches (completion_id, handler, state, attempts, next_attempt_at,
        updated_at, finished_at)
    SELECT id, 'archive', CASE WHEN id % 33 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
           created_at + 3, created_at + 3, created_at + 3
    FROM completions""",
)
PG_SNAPSHOT = tuple(
    f"SELECT count(*), md5(coalesce(string_agg(t::text, '|'), '')) FROM ({q}) AS t"
    for q in (
        "SELECT source, job_id, state, metadata, created_at, terminal_at FROM jobs "
        "ORDER BY created_at, source, job_id",
        "SELECT source, message_id, job_id, received_at FROM deliveries "
        "ORDER BY source, message_id",
        "SELECT c.id, c.job_id, c.phase, d.handler, d.state FROM completions c "
        "JOIN dispatches d ON d.completion_id = c.id ORDER BY c.id",
    )
)


async def _pg_digest(conn: Any) -> list[tuple[int, str]]:
    return [tuple(await conn.fetchrow(q)) for q in PG_SNAPSHOT]


@pytest.mark.postgres
@pytest.mark.parametrize("jobs", SIZES)
async def test_an_old_postgres_store_upgrades_in_place_keeping_every_row(
    postgres_url: str, jobs: int
) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        started = time.perf_counter()
        await conn.execute(_CREATE_VERSIONS)
        for number, migration in enumerate(POSTGRES_MIGRATIONS[:11], 1):
            await conn.execute(migration)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, 0)", number)
        await conn.execute(OLD_PG_ROWS[0], jobs)
        for statement in OLD_PG_ROWS[1:]:
            await conn.execute(statement)
        await conn.execute("ANALYZE")
        made = time.perf_counter() - started
        before = await _pg_digest(conn)
        rows = await conn.fetch("SELECT source, job_id FROM jobs ORDER BY created_at DESC LIMIT 3")
        sample = [(r[0], r[1]) for r in rows]
        latest = await conn.fetchval(
            "SELECT message_id FROM deliveries WHERE job_id = $1", sample[0][1]
        )
    finally:
        await conn.close()
    assert before[0][0] == jobs
    store = PostgresStore(postgres_url)
    started = time.perf_counter()
    await store.open()
    took = time.perf_counter() - started
    try:
        conn = await asyncpg.connect(postgres_url)
        try:
            assert await _pg_digest(conn) == before
            for query in UNLINKED:
                assert await conn.fetchval(query) == 0
        finally:
            await conn.close()
        listed = [j.job.job_id for j in await store.list_jobs(JobFilter(), limit=3)]
        again = await store.ingest(_event(sample[0], latest), ["archive"])
        deliveries = await store.deliveries_for(*sample[0])
    finally:
        await store.close()
    print(f"\nPostgreSQL: {jobs:,} jobs made in {made:.1f} s, upgraded in {took:.1f} s")
    assert listed == [job_id for _, job_id in sample]
    assert again.status == "duplicate"
    assert [d.message_id for d in deliveries] == [latest]
