"""Replay by filter, in chunks: the dispatches of the jobs a JobFilter selects, a few hundred
rows per transaction in dispatch id order, so no statement holds a lock long enough to stall
intake and a second run finds nothing left to requeue (only rows still in the selected state
are changed). Both stores run these statements (PostgreSQL after ``numbered``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from receiver.store import queries
from receiver.store.pg_sql import numbered

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.store.pg_pool import PgPool
    from receiver.store.rows import JobFilter

REPLAYABLE = ("dead", "succeeded")
_PG_METADATA = "(j.metadata ->> ?) = ?"


@dataclass(frozen=True, slots=True)
class ReplayFilter:
    """Which dispatches a bulk replay requeues: those in ``dispatch_state`` (dead or succeeded)
    of the jobs ``jobs`` selects, of one ``handler`` if named, last touched at or after
    ``since`` if given."""

    jobs: JobFilter
    dispatch_state: str = "dead"
    handler: str | None = None
    since: float | None = None


def _selection(f: ReplayFilter, columns: str) -> tuple[str, list[Any]]:
    clauses, params = queries.job_clauses(f.jobs)
    clauses.insert(0, "d.state = ?")
    params.insert(0, f.dispatch_state)
    for clause, value in (("d.handler = ?", f.handler), ("d.updated_at >= ?", f.since)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    query = f"""SELECT {columns} FROM dispatches d
    JOIN completions c ON c.id = d.completion_id
    JOIN jobs j ON j.source = c.source AND j.job_id = c.job_id
    WHERE {" AND ".join(clauses)}"""  # noqa: S608
    return query, params


def count_query(f: ReplayFilter) -> tuple[str, list[Any]]:
    return _selection(f, "count(*)")


def chunk_query(f: ReplayFilter, after_id: int, limit: int) -> tuple[str, list[Any]]:
    query, params = _selection(f, "d.id")
    return f"{query} AND d.id > ? ORDER BY d.id LIMIT ?", [*params, after_id, limit]


def requeue_query(count: int) -> str:
    marks = ",".join("?" * count)
    return f"""UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?,
    updated_at = ?, last_error = NULL, error_code = NULL, lease_owner = NULL, lease_until = NULL,
    finished_at = NULL
    WHERE state = ? AND id IN ({marks})"""  # noqa: S608


def _pg(query: str) -> str:
    return numbered(query.replace(queries.METADATA_HOLDS, _PG_METADATA))


class SQLiteBulk:
    """Bulk replay on SQLite: reads on the reader, each chunk's UPDATE one writer operation."""

    if TYPE_CHECKING:

        async def _write_sync(self, fn: Any, *args: Any) -> Any: ...

        async def _read(self, query: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def count_replayable(self, f: ReplayFilter) -> int:
        query, params = count_query(f)
        count: int = (await self._read(query, params))[0][0]
        return count

    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        query, params = chunk_query(f, after_id, limit)
        ids = [row[0] for row in await self._read(query, params)]
        if not ids:
            return 0, None
        args = (now, now, f.dispatch_state, *ids)
        changed: int = await self._write_sync(_rowcount, requeue_query(len(ids)), args)
        return changed, ids[-1]


def _rowcount(db: Any, query: str, params: Sequence[Any]) -> int:
    count: int = db.execute(query, params).rowcount
    return count


class PostgresBulk:
    """Bulk replay on PostgreSQL: each chunk its own short transaction."""

    _db: PgPool

    async def count_replayable(self, f: ReplayFilter) -> int:
        query, params = count_query(f)
        count: int = (await self._db.fetch(_pg(query), *params))[0][0]
        return count

    async def replay_chunk(
        self, f: ReplayFilter, after_id: int, limit: int, now: float
    ) -> tuple[int, int | None]:
        query, params = chunk_query(f, after_id, limit)
        ids = [row[0] for row in await self._db.fetch(_pg(query), *params)]
        if not ids:
            return 0, None
        changed = await self._db.execute(
            _pg(requeue_query(len(ids))), now, now, f.dispatch_state, *ids
        )
        return changed, ids[-1]
