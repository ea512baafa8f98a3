"""The store's queries keep their plans on an ANALYZEd store of a million jobs.

The statistics are those ``ANALYZE`` wrote for bench.prefill's store (1M jobs, 95 % of them
done): with them, and the queries joined plainly, SQLite scanned every completion to claim a
dispatch (2.8 s a claim, inside the write transaction webhooks wait for)."""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

import pytest

from receiver.store import bulk, fields, history, queries, reprocesses, sql
from receiver.store.rows import JobFilter
from receiver.store.sqlite import sql as sqlite_sql
from receiver.store.sqlite.migrations import SQLITE_MIGRATIONS

if TYPE_CHECKING:
    from pathlib import Path

STATS = [  # sqlite_stat1 of bench.prefill's 1M-job store (schema 13)
    ("completions", "completions_results", "889669 1"),
    ("completions", "sqlite_autoindex_completions_1", "949714 1"),
    ("deliveries", "deliveries_job", "1114242 2"),
    ("deliveries", "sqlite_autoindex_deliveries_1", "1114242 1114242 1"),
    ("jobs", "jobs_terminal", "949714 1"),
    ("jobs", "jobs_listing", "1000000 1 1 1"),
    ("jobs", "jobs_poll", "50286 50286 50286"),
    ("jobs", "sqlite_autoindex_jobs_1", "1000000 1000000 1"),
    ("dispatches", "dispatches_due", "949714 474857 1"),
    ("dispatches", "sqlite_autoindex_dispatches_1", "949714 1 1"),
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
        (sqlite_sql.CLAIM_DISPATCHES, ("o", 1.0, 1.0, 1.0, 1.0, '["busy"]', 10)),
        (sqlite_sql.NEXT_DUE, ('["busy"]', '["busy"]')),
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


def test_the_backlog_reads_only_the_dispatches_waiting(tmp_path: Path) -> None:
    """The backlog (every metrics scrape, the status page) counts and dates the dispatches
    waiting through dispatches_due: a join on two states read every dispatch (70-90 ms on
    bench.prefill's store), a read whose snapshot the checkpoint's held pass waited for."""
    conn = _analyzed(tmp_path)
    try:
        plan = _plan(conn, queries.BACKLOG, ())
    finally:
        conn.close()
    touching = [step for step in plan if re.match(r"(SCAN|SEARCH) (d|dispatches)\b", step)]
    assert touching, plan
    assert all("dispatches_due" in step for step in touching), plan
    assert not [step for step in plan if step.startswith("SCAN") and "USING" not in step
                and "CONSTANT" not in step], plan  # fmt: skip


_EVERY = JobFilter(source="acme-docs", state="failed", created_after=1.0, created_before=2.0,
                   metadata=(("tenant", "t"),), min_confidence=0.5, error_code="http_5xx",
                   field="total", max_confidence=0.5)  # fmt: skip
# Each query of the store that a job's id, a completion's or a dispatch's selects (the admin
# API's reads of one job, the ingest's statements, purges, claims, replays, exports), built as
# the stores build them.
_BY_KEY: dict[str, str] = {
    "select_job_id": sql.SELECT_JOB_ID,
    "insert_completion": sqlite_sql.INSERT_COMPLETION,
    "requeue_dead_for_job": sql.REQUEUE_DEAD_FOR_JOB,
    "dispatches_for": sql.SELECT_DISPATCHES_FOR,
    "select_job": sql.SELECT_JOB,
    "completion_for": f"{sql.SELECT_COMPLETION} WHERE job = {sql.JOB_KEY}",
    "deliveries_for": queries.SELECT_DELIVERIES,
    "attempts_for": history.ATTEMPTS_FOR,
    "replay_job": sql.replay_query("acme-docs", "j", None, None, False)[0],
    "replay_handler": sql.replay_query(None, None, "h", 1.0, False)[0],
    "listing_one_job": queries.list_jobs_query(JobFilter("acme-docs", "j"), 1, None)[0],
    "listing_newest": queries.list_jobs_query(JobFilter(), 50, (1.0, "s", "j"))[0],
    "listing_every_filter": queries.list_jobs_query(_EVERY, 50, None)[0],
    "listing_of_sources": queries.list_jobs_query(JobFilter(sources=("a", "b")), 50, None)[0],
    "field_names": queries.field_names_query(JobFilter(created_after=1.0), 10)[0],
    "fields_of": fields.fields_of_query(3),
    "purgeable": queries.PURGEABLE,
    "delete_deliveries": queries.DELETE_DELIVERIES,
    "delete_dispatches": queries.DELETE_DISPATCHES,
    "delete_completion": queries.DELETE_COMPLETION,
    "delete_job": queries.DELETE_JOB,
    "completions_after": queries.completions_after_query(0, 100)[0],
    "completions_after_of_sources": queries.completions_after_query(0, 100, ("a", "b"))[0],
    "last_completion_id": queries.LAST_COMPLETION_ID,
    "claim_completions": sqlite_sql.CLAIM_COMPLETIONS,
    "resolve_completion": sql.RESOLVE_COMPLETION,
    "due_polls": sql.DUE_POLLS,
    "schedule_poll": sql.SCHEDULE_POLL,
    "bulk_chunk": bulk.chunk_query(bulk.ReplayFilter(JobFilter(source="acme-docs")), 0, 100)[0],
    "dead_list": history.dead_list_query(None, None, 100)[0],
    "dead_list_of_sources": history.dead_list_query(None, None, 100, ("a", "b"))[0],
    "reprocess_of": reprocesses.OF_JOB,
    "reprocess_from": reprocesses.FROM_JOB,
}
# As the SQLite store runs them: the shared statements in its dialect.
_BY_KEY = {name: sqlite_sql.DIALECT.sql(query) for name, query in _BY_KEY.items()}
_BIG = {"jobs", "deliveries", "completions", "dispatches", "job_fields", "attempts"}


def _parameters(query: str) -> tuple[object, ...] | dict[str, object]:
    names = re.findall(r":(\w+)", query.replace("::", ""))
    if names:
        return dict.fromkeys(names, 1)
    numbered = [int(n) for n in re.findall(r"\?(\d+)", query)]
    return (1,) * (max(numbered) if numbered else query.count("?"))


def _full_scans(plan: list[str], aliases: dict[str, str]) -> list[str]:
    """The steps that read a whole big table (not a SEARCH, not an index's ordered scan)."""
    out = []
    for step in plan:
        m = re.match(r"SCAN (\w+)", step)
        if m and aliases.get(m.group(1), m.group(1)) in _BIG and "USING" not in step:
            out.append(step)
    return out


@pytest.mark.parametrize("name", sorted(_BY_KEY))
def test_no_query_reads_a_whole_table_to_find_a_job_or_its_rows(tmp_path: Path, name: str) -> None:
    """A query by job, completion or dispatch finds its rows through a key: since jobs got an
    id of their own (migration 13), the completion and deliveries of a job are found by it,
    and the provider's (source, job_id) only through jobs."""
    query = _BY_KEY[name]
    aliases = dict(re.findall(r"\b(jobs|deliveries|completions|dispatches|attempts) (\w)\b", query))
    aliases = {alias: table for table, alias in aliases.items()}
    conn = _analyzed(tmp_path)
    try:
        plan = _plan(conn, query, _parameters(query))
    finally:
        conn.close()
    assert not _full_scans(plan, aliases), plan
    if "JOIN completions c" in query or "job = (SELECT" in query:
        # the completion of a job through its job's id, never by the provider's keys
        assert not [s for s in plan if "completions" in s and "source" in s], plan
