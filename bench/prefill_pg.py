"""``bench.prefill`` for PostgreSQL: the same month of rows, loaded with COPY, kept as a template.

``ensure_pg_prefilled(jobs)`` loads database ``jobhook_bench_template`` on the machine's server
(127.0.0.1:5432, or ``JOBHOOK_BENCH_POSTGRES_URL``'s) with the current schema (the real
migrations, run by ``PostgresStore.open``) and ``jobs`` jobs, unless the database's comment
says it holds them already for this schema and generator. ``fresh_database()`` makes
``jobhook_bench`` a copy of it (``CREATE DATABASE ... TEMPLATE``), the one a run writes into.
``python -m bench.prefill_pg [JOBS]`` loads the template.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.prefill import GENERATOR, INSERTS, month
from receiver.store.postgres.migrations import POSTGRES_MIGRATIONS

ADMIN_URL = os.environ.get(
    "JOBHOOK_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
TEMPLATE = "jobhook_bench_template"
DATABASE = "jobhook_bench"
COLUMNS = {
    table: [c.strip() for c in sql.split("(", 1)[1].split(")", 1)[0].split(",")]
    for table, sql in INSERTS.items()
}


def url_of(name: str) -> str:
    return urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))


def _marker(jobs: int) -> str:
    return json.dumps({"jobs": jobs, "schema": len(POSTGRES_MIGRATIONS), "generator": GENERATOR})


async def _comment(admin: Any, name: str) -> str | None:
    value: str | None = await admin.fetchval(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name
    )
    return value


async def _ensure(jobs: int) -> str:
    import asyncpg  # type: ignore[import-untyped]

    admin = await asyncpg.connect(ADMIN_URL)
    try:
        if await _comment(admin, TEMPLATE) == _marker(jobs):
            return url_of(TEMPLATE)
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
        started = time.perf_counter()
        await load(url_of(TEMPLATE), jobs)
        await admin.execute(f"COMMENT ON DATABASE \"{TEMPLATE}\" IS '{_marker(jobs)}'")
        print(f"bench: prefilled PostgreSQL {TEMPLATE} with {jobs:,} jobs in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip
    finally:
        await admin.close()
    return url_of(TEMPLATE)


async def load(url: str, jobs: int) -> None:
    """Migrate the empty database at ``url`` and load ``jobs`` jobs' rows into it."""
    import asyncpg

    from receiver.store.postgres.store import PostgresStore

    store = PostgresStore(url)
    await store.open()  # the real migrations
    await store.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET synchronous_commit = off")
        for rows in month(jobs):
            async with conn.transaction():
                for table, values in rows.items():
                    if table == "completions":  # the constants SQLite's statement holds
                        values = [(*r[:9], "ready", *r[9:12], 1, *r[12:]) for r in values]
                    await conn.copy_records_to_table(table, records=values,
                                                     columns=COLUMNS[table])  # fmt: skip
        # The ids were loaded as they were, not drawn: their sequences start after them.
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('completions', 'id'), "
            "(SELECT coalesce(max(id), 1) FROM completions))"
        )
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('jobs', 'id'), "
            "(SELECT coalesce(max(id), 1) FROM jobs))"
        )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


def ensure_pg_prefilled(jobs: int = 1_000_000) -> str:
    """The URL of the template database holding ``jobs`` jobs (loaded now unless current)."""
    return asyncio.run(_ensure(jobs))


async def _fresh(name: str, template: str | None) -> str:
    import asyncpg

    admin = await asyncpg.connect(ADMIN_URL)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        # FILE_COPY (PostgreSQL 15+): copied files and a checkpoint, not a gigabyte of WAL
        # that the first round's commits would wait behind.
        copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        await admin.execute(f'CREATE DATABASE "{name}"{copy}')
    finally:
        await admin.close()
    return url_of(name)


def fresh_database(name: str = DATABASE) -> str:
    """``name`` made anew as a copy of the prefilled template; its URL."""
    return asyncio.run(_fresh(name, TEMPLATE))


def empty_database(name: str = DATABASE) -> str:
    """``name`` made anew and empty (jobhook migrates it); its URL."""
    return asyncio.run(_fresh(name, None))


async def _size(name: str) -> int:
    import asyncpg

    admin = await asyncpg.connect(ADMIN_URL)
    try:
        size: int = await admin.fetchval("SELECT pg_database_size($1)", name)
    finally:
        await admin.close()
    return size


def database_size(name: str = DATABASE) -> int:
    return asyncio.run(_size(name))


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    print(ensure_pg_prefilled(jobs))


if __name__ == "__main__":
    main()
