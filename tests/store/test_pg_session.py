"""The PostgreSQL pool's two shortcuts and what they rest on: a released connection is not reset
(the store keeps nothing in a session), and one statement runs without BEGIN and COMMIT (its
answer comes only after its commit)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from receiver.errors import StoreUnavailableError
from receiver.store.postgres.pool import PgPool

RECEIVER = Path(__file__).resolve().parents[2] / "receiver"
# What would leave state in a session for the next user of a pooled connection (the store's
# SQL is written in capitals, as these are).
SESSION_STATE = re.compile(
    r"^\s*(SET|RESET)\s(?!LOCAL\b)|\bLISTEN\b|\bpg_advisory_lock(_shared)?\s*\(|\bCURSOR\b"
    r"|\bset_config\s*\([^)]*,\s*false\s*\)|\bPREPARE\s+\w+\s+AS\b|\bCREATE\s+TEMP"
)


def _strings(path: Path) -> list[str]:
    """The module's string constants but its docstrings (strings standing as statements)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]


def test_the_service_keeps_no_state_in_a_postgres_session() -> None:
    found = [
        f"{path.relative_to(RECEIVER.parent)}: {text.strip()[:80]!r}"
        for path in sorted(RECEIVER.rglob("*.py"))
        for text in _strings(path)
        if SESSION_STATE.search(text)
    ]
    assert found == []


def test_the_session_check_finds_what_it_looks_for() -> None:
    stateful = (
        "SET statement_timeout = 0",
        "LISTEN jobs",
        "SELECT pg_advisory_lock(1)",
        "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
        "SELECT set_config('a.b', '1', false)",
    )
    stateless = (
        "UPDATE jobs\nSET state = $1",
        "SET LOCAL lock_timeout = 0",
        "SELECT pg_advisory_xact_lock(1)",
        "SELECT set_config('a.b', '1', true)",
    )
    assert [bool(SESSION_STATE.search(text)) for text in stateful] == [True] * len(stateful)
    assert [bool(SESSION_STATE.search(text)) for text in stateless] == [False] * len(stateless)


@pytest.mark.postgres
async def test_a_released_connection_is_not_reset(postgres_url: str) -> None:
    pool = PgPool(postgres_url, min_size=1, max_size=1, timeout=10.0)

    async def mark(conn: Any) -> None:
        await conn.execute("SELECT set_config('application_name', 'jobhook-kept', false)")

    async def nothing(conn: Any) -> None:
        return None

    await pool.open(nothing)
    try:
        await pool.transaction(mark)
        # The one connection, back from the pool: asyncpg's RESET ALL would have cleared it.
        assert await pool.fetch("SHOW application_name") == [("jobhook-kept",)]
    finally:
        await pool.close()


@pytest.mark.postgres
async def test_one_statement_answers_after_its_commit(postgres_url: str) -> None:
    pool = PgPool(postgres_url, min_size=1, max_size=1, timeout=10.0)

    async def table(conn: Any) -> None:
        await conn.execute(
            "CREATE TABLE deferred (k int, CONSTRAINT k_once UNIQUE (k) DEFERRABLE "
            "INITIALLY DEFERRED)"
        )

    async def twice(conn: Any) -> list[Any]:
        return list(await conn.fetch("INSERT INTO deferred VALUES (1), (1) RETURNING k"))

    async def once(conn: Any) -> list[Any]:
        return list(await conn.fetch("INSERT INTO deferred VALUES (2) RETURNING k"))

    await pool.open(table)
    try:
        # The statement itself succeeds; only its commit fails (the constraint is checked
        # then): an answer sent before the commit would have been rows, not this error.
        with pytest.raises(StoreUnavailableError, match="k_once"):
            await pool.transaction(twice, one_statement=True)
        assert await pool.transaction(once, one_statement=True) == [(2,)]
        assert await pool.fetch("SELECT k FROM deferred") == [(2,)]
    finally:
        await pool.close()
