"""Each store's per-field methods: resolving with fields, reading them, their stats.

The statements are in ``receiver.store.fields``; a completion's resolution and its fields are
one transaction, so a job never shows a result without its fields or the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import fields, queries, records, sql
from receiver.store.pg_sql import _METADATA_HOLDS, numbered

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Mapping, Sequence

    from receiver.store.pg_pool import Conn, PgPool
    from receiver.store.rows import FieldStats, FieldValue, JobFilter, Resolution

    FieldsByJob = dict[tuple[str, str], list[FieldValue]]

MAX_JOBS_PER_READ = 500


def field_names_query(where: JobFilter, limit: int) -> tuple[str, list[Any]]:
    """The distinct fields of the jobs ``where`` selects, alphabetical, at most ``limit``."""
    clauses, params = queries.job_clauses(where)
    if not clauses:
        return fields.NAMES_OF_ALL, [limit]
    # The matching completions first, then their fields by primary key: a join driven from
    # job_fields would look up a job for every field row of the store.
    query = f"""SELECT DISTINCT field FROM job_fields WHERE completion_id IN (
        SELECT c.id FROM jobs j JOIN completions c ON c.source = j.source AND c.job_id = j.job_id
        WHERE {" AND ".join(clauses)}) ORDER BY field LIMIT ?"""  # noqa: S608
    return query, [*params, limit]


def resolve_sync(
    db: sqlite3.Connection,
    params: Sequence[Any],
    completion_id: int,
    rows: Sequence[tuple[Any, ...]],
) -> bool:
    """The resolution, then (if the lease was still ours) the fields it found; False when the
    lease was lost and nothing was stored."""
    if not db.execute(sql.RESOLVE_COMPLETION, params).rowcount:
        return False
    if rows:
        db.execute(fields.DELETE_FIELDS, (completion_id,))
        db.executemany(fields.INSERT_FIELD, rows)
    return True


class SQLiteFields:
    """Per-field confidence through the SQLite store's writer and reader."""

    if TYPE_CHECKING:

        async def _write_sync(self, fn: Callable[..., Any], *args: Any) -> Any: ...

        async def _read(self, query: str, params: Sequence[Any] = ()) -> list[Any]: ...

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        params = records.resolution_params(completion_id, owner, resolution)
        rows = fields.insert_rows(completion_id, resolution.fields)
        return bool(await self._write_sync(resolve_sync, params, completion_id, rows))

    async def fields_of(self, keys: Sequence[tuple[str, str]]) -> FieldsByJob:
        """The extracted fields of these jobs ((source, job_id) pairs), by job."""
        found: FieldsByJob = {}
        for start in range(0, len(keys), MAX_JOBS_PER_READ):
            chunk = keys[start : start + MAX_JOBS_PER_READ]
            flat = [part for key in chunk for part in key]
            found.update(
                fields.group_fields(await self._read(fields.fields_of_query(len(chunk)), flat))
            )
        return found

    async def field_names(self, where: JobFilter, limit: int) -> list[str]:
        query, params = field_names_query(where, limit)
        return [str(r[0]) for r in await self._read(query, params)]

    async def field_stats(
        self, since: float, thresholds: Mapping[str, float], default: float
    ) -> FieldStats:
        return await fields.field_stats(self._read, since, thresholds, default)


class PostgresFields:
    """Per-field confidence in the PostgreSQL store."""

    _db: PgPool

    async def resolve_completion(
        self, completion_id: int, owner: str, resolution: Resolution
    ) -> bool:
        params = records.resolution_params(completion_id, owner, resolution)
        rows = fields.insert_rows(completion_id, resolution.fields)

        async def op(conn: Conn) -> bool:
            status = await conn.execute(_RESOLVE, *params)
            if status.rsplit(" ", 1)[-1] == "0":
                return False
            if rows:
                await conn.execute(_DELETE, completion_id)
                await conn.executemany(_INSERT, rows)
            return True

        return bool(await self._db.transaction(op))

    async def fields_of(self, keys: Sequence[tuple[str, str]]) -> FieldsByJob:
        found: FieldsByJob = {}
        for start in range(0, len(keys), MAX_JOBS_PER_READ):
            chunk = keys[start : start + MAX_JOBS_PER_READ]
            flat = [part for key in chunk for part in key]
            query = numbered(fields.fields_of_query(len(chunk)))
            found.update(fields.group_fields(await self._db.fetch(query, *flat)))
        return found

    async def field_names(self, where: JobFilter, limit: int) -> list[str]:
        query, params = field_names_query(where, limit)
        query = query.replace(queries.METADATA_HOLDS, _METADATA_HOLDS)
        return [str(r[0]) for r in await self._db.fetch(numbered(query), *params)]

    async def field_stats(
        self, since: float, thresholds: Mapping[str, float], default: float
    ) -> FieldStats:
        async def read(query: str, params: Sequence[Any]) -> list[Any]:
            return await self._db.fetch(numbered(query), *params)

        return await fields.field_stats(read, since, thresholds, default)


_RESOLVE = numbered(sql.RESOLVE_COMPLETION)
_DELETE = numbered(fields.DELETE_FIELDS)
_INSERT = numbered(fields.INSERT_FIELD)
