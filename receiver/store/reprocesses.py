"""Reprocess links: which new job a finished job was submitted again as, claimed before it is.

One row per old job (``UNIQUE (source, job_id)``): a claim is an upsert that only wins while no
submission is under way or done, so two callers (or replicas) never submit the same job twice.
States: ``submitting`` (claimed, the POST is under way), ``submitted`` (``new_job_id`` known),
``failed`` (the provider refused or could not be reached: claimable again), ``unknown`` (the
POST timed out: the job may exist, so only ``force`` claims it again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store.pg_sql import numbered
from receiver.store.rows import ReprocessRow

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from receiver.store.pg_pool import PgPool

COLUMNS = "source, job_id, state, new_job_id, attempts, error, created_at, updated_at"
CLAIM = """INSERT INTO reprocesses (source, job_id, state, attempts, owner, created_at, updated_at)
VALUES (?, ?, 'submitting', 1, ?, ?, ?)
ON CONFLICT (source, job_id) DO UPDATE SET state = 'submitting',
    attempts = reprocesses.attempts + 1, owner = excluded.owner, error = NULL,
    updated_at = excluded.updated_at
WHERE reprocesses.state = 'failed'
    OR (reprocesses.state = 'submitting' AND reprocesses.updated_at < ?)
    OR (? AND reprocesses.state IN ('submitted', 'unknown'))
RETURNING attempts"""
FINISH = """UPDATE reprocesses SET state = ?, new_job_id = COALESCE(?, new_job_id), error = ?,
    owner = NULL, updated_at = ?
WHERE source = ? AND job_id = ? AND owner = ? AND state = 'submitting'"""
OF_JOB = f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND job_id = ?"  # noqa: S608
FROM_JOB = f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND new_job_id = ?"  # noqa: S608


def of_jobs(count: int) -> str:
    marks = ",".join("?" * count)
    return f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND job_id IN ({marks})"  # noqa: S608


def row(values: Sequence[Any]) -> ReprocessRow:
    return ReprocessRow(*values)


def _state(new_job_id: str | None, unknown: bool) -> str:
    return "submitted" if new_job_id is not None else "unknown" if unknown else "failed"


def claim_params(
    source: str, job_id: str, owner: str, now: float, stale_before: float, force: bool
) -> tuple[Any, ...]:
    return (source, job_id, owner, now, now, stale_before, force)


def _claim_sync(db: sqlite3.Connection, params: Sequence[Any]) -> bool:
    return db.execute(CLAIM, params).fetchone() is not None


def _finish_sync(db: sqlite3.Connection, params: Sequence[Any]) -> None:
    db.execute(FINISH, params)


class SQLiteReprocesses:
    """Reprocess links through the SQLite store's writer and reader."""

    if TYPE_CHECKING:

        async def _write_sync(self, fn: Callable[..., Any], *args: Any) -> Any: ...

        async def _read(self, query: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        params = claim_params(source, job_id, owner, now, stale_before, force)
        won: bool = await self._write_sync(_claim_sync, params)
        return won

    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        state = _state(new_job_id, unknown)
        params = (state, new_job_id, error, now, source, job_id, owner)
        await self._write_sync(_finish_sync, params)

    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        rows = await self._read(OF_JOB, (source, job_id))
        return row(rows[0]) if rows else None

    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        rows = await self._read(FROM_JOB, (source, new_job_id))
        return row(rows[0]) if rows else None

    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        if not job_ids:
            return {}
        rows = await self._read(of_jobs(len(job_ids)), (source, *job_ids))
        return {r.job_id: r for r in map(row, rows)}


class PostgresReprocesses:
    """Reprocess links in the shared PostgreSQL store: one claim wins across replicas."""

    _db: PgPool

    async def claim_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, stale_before: float,
        force: bool = False,
    ) -> bool:  # fmt: skip
        params = claim_params(source, job_id, owner, now, stale_before, force)
        rows = await self._db.transaction(lambda conn: conn.fetch(_PG_CLAIM, *params))
        return bool(rows)

    async def finish_reprocess(
        self, source: str, job_id: str, owner: str, now: float, *, new_job_id: str | None,
        error: str | None, unknown: bool = False,
    ) -> None:  # fmt: skip
        state = _state(new_job_id, unknown)
        await self._db.execute(
            numbered(FINISH), state, new_job_id, error, now, source, job_id, owner
        )

    async def reprocess_of(self, source: str, job_id: str) -> ReprocessRow | None:
        rows = await self._db.fetch(numbered(OF_JOB), source, job_id)
        return row(rows[0]) if rows else None

    async def reprocessed_from(self, source: str, new_job_id: str) -> ReprocessRow | None:
        rows = await self._db.fetch(numbered(FROM_JOB), source, new_job_id)
        return row(rows[0]) if rows else None

    async def reprocesses_of(self, source: str, job_ids: Sequence[str]) -> dict[str, ReprocessRow]:
        if not job_ids:
            return {}
        rows = await self._db.fetch(numbered(of_jobs(len(job_ids))), source, *job_ids)
        return {r.job_id: r for r in map(row, rows)}


_PG_CLAIM = numbered(CLAIM.replace("OR (? AND", "OR (?::boolean AND"))
