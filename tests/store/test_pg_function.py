"""The batch function of migration 10 (jobhook_ingest_batch): the one-event path's statements,
and a database that version 9 left, upgraded in place."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import asyncpg  # type: ignore[import-untyped]
import pytest

from receiver.models import State
from receiver.store import sql
from receiver.store.postgres import sql as pg_sql
from receiver.store.postgres.functions import INGEST_BY_JOB_ID_FUNCTION, INGEST_SET_FUNCTION
from receiver.store.postgres.migrations import _CREATE_VERSIONS, POSTGRES_MIGRATIONS
from tests.store.test_pg_batch import ev, opened

if TYPE_CHECKING:
    from collections.abc import Sequence


def _spelled_out(statement: str, args: Sequence[str]) -> str:
    """``statement`` with each placeholder (``$n`` or the n-th ``?``) the n-th of ``args``."""
    count = iter(args)
    statement = re.sub(r"\?", lambda _: next(count), statement)
    return re.sub(r"\$(\d+)", lambda m: args[int(m.group(1)) - 1], statement)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_batch_function_runs_the_statements_of_one_event_per_transaction() -> None:
    """A change to pg_sql's ingest statements needs a migration replacing the function."""
    names = ["p_source[i]", "p_job_id[i]", "p_state[i]", "p_provider_status[i]",
             "p_metadata[i]", "p_error[i]", "p_at[i]", "p_terminal_at[i]", "p_progress_done[i]",
             "p_progress_total[i]", "p_expected_pages[i]", "p_poll_at[i]",
             "p_error_code[i]", "v_job"]  # fmt: skip
    delivery = ["p_source[i]", "p_message_id[i]", "p_job_id[i]", "p_state[i]",
                "p_provider_status[i]", "p_at[i]", "v_job"]  # fmt: skip
    at, key = ["p_at[i]", "p_at[i]"], ["p_source[i]", "p_job_id[i]"]
    completion = ["v_stored", "p_at[i]", "p_phase[i]", "p_result_ref[i]", "p_traceparent[i]"]
    dispatch = ["v_completion", "p_handlers[h]", "p_at[i]", "p_at[i]"]
    body = _words(INGEST_BY_JOB_ID_FUNCTION)
    expected = [
        _spelled_out(pg_sql.SELECT_JOB_ID, key).replace(
            "SELECT id, state", "SELECT id, state INTO v_job, v_known"
        ),
        pg_sql.NEXT_JOB_ID.replace("SELECT ", "v_job := "),
        _spelled_out(sql.INSERT_DELIVERY_ROW, delivery),
        _spelled_out(sql.REQUEUE_DEAD_FOR_JOB, [*at, "v_job"]),
        _spelled_out(pg_sql.JOB_STATE_BY_ID, ["v_job"]),
        _spelled_out(pg_sql.UPSERT_JOB, names) + " INTO v_stored, o_state, v_took",
        _spelled_out(pg_sql.MOVE_DELIVERY, ["v_stored", "p_source[i]", "p_message_id[i]"]),
        _spelled_out(pg_sql.INSERT_COMPLETION, completion) + " INTO v_completion",
        _spelled_out(sql.INSERT_DISPATCH, dispatch),
        pg_sql.LOCK_COMPLETIONS_SHARED.replace("SELECT", "PERFORM"),
    ]
    for statement in expected:
        assert _words(statement) in body, statement


def test_the_set_function_updates_a_known_job_as_one_event_per_transaction_does() -> None:
    """Migration 14's upsert of the batch's jobs: the one-event path's news, word for word (a
    change there needs a migration replacing both functions)."""
    news = _words(sql.job_news("jobhook_merge_patch"))
    assert news.startswith("ON CONFLICT")
    assert news in _words(INGEST_SET_FUNCTION)
    for statement, args in (
        (sql.REQUEUE_DEAD_FOR_JOB, ["p_at[i]", "p_at[i]", "v_job[i]"]),
        (pg_sql.MOVE_DELIVERY, ["v_stored[i]", "p_source[i]", "p_message_id[i]"]),
    ):
        assert _words(_spelled_out(statement, args)) in _words(INGEST_SET_FUNCTION), statement


# What version 11 stored for two jobs, in its own shape (keyed by the provider's job id): one in
# progress with its delivery, one done with its delivery, completion and dispatch.
_V11_ROWS = (
    """INSERT INTO jobs (source, job_id, state, provider_status, metadata, created_at,
        updated_at, last_news_at, terminal_at)
    VALUES ('reducto', 'old-run', 'running', 'InProgress', '{}', $1, $1, $1, NULL),
           ('reducto', 'old-done', 'succeeded', 'Completed', '{}', $1, $1, $1, $1)""",
    """INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at)
    VALUES ('reducto', 'o1', 'old-run', 'running', 'InProgress', $1),
           ('reducto', 'o2', 'old-done', 'succeeded', 'Completed', $1)""",
    """INSERT INTO completions (source, job_id, state, provider_status, metadata, created_at,
        next_attempt_at, phase)
    VALUES ('reducto', 'old-done', 'succeeded', 'Completed', '{}', $1, $1, 'ready')""",
    """INSERT INTO dispatches (completion_id, handler, next_attempt_at, updated_at)
    SELECT id, 'a', $1, $1 FROM completions""",
)


async def _at_version_11(url: str) -> None:
    """The schema as version 11 left it, with two jobs stored in its shape."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(_CREATE_VERSIONS)
        for number, migration in enumerate(POSTGRES_MIGRATIONS[:11], 1):
            await conn.execute(migration)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, 0)", number)
        for statement in _V11_ROWS:
            await conn.execute(statement, time.time() - 5)
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_a_database_at_migration_11_upgrades_in_place(postgres_url: str) -> None:
    await _at_version_11(postgres_url)
    async with opened(postgres_url) as store:
        again = await store.ingest(ev("old-done", State.SUCCEEDED, "o2"), ["a"])
        done = await store.ingest(ev("old-run", State.SUCCEEDED, "o3"), ["a"])
        job = await store.get_job("reducto", "old-run")
        dispatches = await store.dispatches_for("reducto", "old-done")
        deliveries = await store.deliveries_for("reducto", "old-run")
        completion = await store.completion_for("reducto", "old-done")
    conn = await asyncpg.connect(postgres_url)
    try:
        versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")]
    finally:
        await conn.close()
    assert again.status == "duplicate"
    assert (done.status, done.completed) == ("accepted", True)
    assert job is not None
    assert job.terminal_at is not None
    assert done.took == job.terminal_at - job.created_at >= 5
    assert [d.handler for d in dispatches] == ["a"]
    assert [d.message_id for d in deliveries] == ["o1", "o3"]
    assert completion is not None
    assert completion.state == State.SUCCEEDED
    assert sorted(versions) == list(range(1, len(POSTGRES_MIGRATIONS) + 1))
