"""The dispatcher's queries keep their plans on an ANALYZEd store of a million jobs.

The statistics are those ``ANALYZE`` wrote for bench.prefill's store (1M jobs, 95 % of them
done): with them, and the queries joined plainly, SQLite scanned every completion to claim a
dispatch (2.8 s a claim, inside the write transaction webhooks wait for)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from receiver.store import sql
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS

if TYPE_CHECKING:
    from pathlib import Path

STATS = [  # sqlite_stat1 of bench.prefill's 1M-job store
    ("dispatches", "dispatches_due", "949581 474791 1"),
    ("dispatches", "sqlite_autoindex_dispatches_1", "949581 1 1"),
    ("completions", "completions_results", "889506 1"),
    ("completions", "sqlite_autoindex_completions_1", "949581 949581 1"),
    ("deliveries", "deliveries_job", "1114063 1114063 2"),
    ("deliveries", "sqlite_autoindex_deliveries_1", "1114063 1114063 1"),
    ("jobs", "jobs_terminal", "949581 1"),
    ("jobs", "jobs_listing", "1000000 1 1 1"),
    ("jobs", "jobs_poll", "50419 50419 50419"),
    ("jobs", "sqlite_autoindex_jobs_1", "1000000 1000000 1"),
]


def _analyzed(tmp_path: Path) -> sqlite3.Connection:
    db = tmp_path / "a.db"
    with sqlite3.connect(db) as conn:
        for script in SQLITE_MIGRATIONS:
            conn.executescript(script)
        conn.execute("ANALYZE")
        conn.execute("DELETE FROM sqlite_stat1")
        conn.executemany("INSERT INTO sqlite_stat1 VALUES (?, ?, ?)", STATS)
    return sqlite3.connect(db)  # a new connection reads the statistics


def _plan(
    conn: sqlite3.Connection, query: str, params: tuple[object, ...] | dict[str, object]
) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params)]


@pytest.mark.parametrize(
    ("query", "params"),
    [
        (sql.CLAIM_DISPATCHES, ("o", 1.0, 1.0, 1.0, 1.0, '["busy"]', 10)),
        (sql.NEXT_DUE, {"busy": '["busy"]'}),
    ],
    ids=["claim_dispatches", "next_due"],
)
def test_dispatches_are_found_through_their_index_not_by_scanning(
    tmp_path: Path, query: str, params: tuple[object, ...] | dict[str, object]
) -> None:
    conn = _analyzed(tmp_path)
    try:
        plan = _plan(conn, query, params)
    finally:
        conn.close()
    # json_each is the list of busy handlers passed in, never a table.
    scans = [step for step in plan if step.startswith("SCAN") and "json_each" not in step]
    assert not [step for step in scans if "circuits" not in step]
    touching = [step for step in plan if step.startswith("SEARCH d ")]
    assert touching
    assert all("dispatches_due" in step for step in touching), plan
    assert not any("SEARCH c " in step and "PRIMARY KEY" not in step for step in plan), plan
