"""The statements behind per-field confidence: ``job_fields`` rows, their stats, their filter.

A resolved completion's extracted fields are rows of ``job_fields`` (completion, field,
confidence, value), written with the resolution in one transaction, with the job's source and
creation time copied so the stats read one table. The SQL is what SQLite and PostgreSQL both
speak (grouped sums, CASE, row values); PostgreSQL renumbers them (``numbered``).
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Any

from receiver.store import sql
from receiver.store.rows import FieldStat, FieldStats, FieldValue

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from receiver.store.rows import JobFilter

MAX_JOBS_PER_READ = 500
"""``fields_of`` reads the fields of at most this many jobs a statement."""
MAX_STATS_ROWS = 500
"""At most this many (source, field) pairs in the stats, the least confident first."""
NAMES_OF_ALL = "SELECT DISTINCT field FROM job_fields ORDER BY field LIMIT ?"

INSERT_FIELD = """
INSERT INTO job_fields (completion_id, field, source, created_at, confidence, value)
SELECT c.id, ?, c.source, j.created_at, ?, ?
FROM completions c JOIN jobs j ON j.id = c.job
WHERE c.id = ?
ON CONFLICT (completion_id, field) DO UPDATE
SET confidence = excluded.confidence, value = excluded.value
"""
DELETE_FIELDS = "DELETE FROM job_fields WHERE completion_id = ?"


AVG_CONFIDENCE = """
SELECT avg(c.confidence) FROM jobs j
JOIN completions c ON c.job = j.id
WHERE j.created_at >= ? AND c.confidence IS NOT NULL {only}
"""

# One pass over the period's rows (the covering index job_fields_created), grouped by value
# to 4 decimals: at most 10,001 rows a (source, field) leave the database, whatever the count,
# with exact counts, sums and below-threshold counts; the percentile is read off the groups.
_FIELD_STATS = """
SELECT source, field, round(confidence * 10000) AS v, count(*), sum(confidence),
       sum(CASE WHEN confidence < {threshold} THEN 1 ELSE 0 END), {threshold}
FROM job_fields WHERE created_at >= ? AND confidence IS NOT NULL {only}
GROUP BY source, field, v ORDER BY source, field, v
"""
SCALE = 10_000.0

# Jobs whose result holds a field (at or below a confidence): a semi-join the planner can
# serve from the (field, confidence) index.
FIELD_HOLDS = "c.id IN (SELECT completion_id FROM job_fields WHERE field = ?)"
FIELD_AT_MOST = "c.id IN (SELECT completion_id FROM job_fields WHERE field = ? AND confidence <= ?)"


def field_clause(where: JobFilter) -> tuple[str, list[Any]] | None:
    """The ``field`` / ``max_confidence`` filter as one SQL condition, or None."""
    if where.field is None:
        return None
    if where.max_confidence is None:
        return FIELD_HOLDS, [where.field]
    return FIELD_AT_MOST, [where.field, where.max_confidence]


def insert_rows(completion_id: int, fields: Sequence[FieldValue]) -> list[tuple[Any, ...]]:
    return [(f.field, f.confidence, f.value, completion_id) for f in fields]


def field_stats_query(
    since: float,
    thresholds: Mapping[str, float],
    default: float,
    sources: Sequence[str] | None = None,
) -> tuple[str, list[Any]]:
    """The stats SELECT with each source's threshold as a CASE over ``source``; of the fields
    of ``sources``' jobs only, when given."""
    params: list[Any] = []
    case = "CAST(? AS double precision)"
    if thresholds:
        whens = " WHEN ? THEN CAST(? AS double precision)" * len(thresholds)
        case = f"CASE source{whens} ELSE {case} END"
        for source, value in sorted(thresholds.items()):
            params += [source, value]
    params.append(default)
    # The CASE appears twice (the comparison, then the answer): its values twice too.
    only, values = sql.in_sources(sources, "source")
    query = _FIELD_STATS.format(threshold=case, only=only)
    return query, [*params, *params, since, *values]


async def field_stats(
    read: Callable[[str, Sequence[Any]], Awaitable[list[Any]]],
    since: float,
    thresholds: Mapping[str, float],
    default: float,
    sources: Sequence[str] | None = None,
) -> FieldStats:
    only = sql.in_sources(sources)[1]
    ((avg,),) = await read(sql.scoped(AVG_CONFIDENCE, sources), (since, *only))
    query, params = field_stats_query(since, thresholds, default, sources)
    figures = [
        _figures(pair, list(rows)) for pair, rows in groupby(await read(query, params), key=_pair)
    ]
    figures.sort(key=lambda f: (f.mean, f.source, f.field))
    return FieldStats(
        avg_confidence=None if avg is None else float(avg), fields=tuple(figures[:MAX_STATS_ROWS])
    )


def _pair(row: Sequence[Any]) -> tuple[str, str]:
    return (row[0], row[1])


def _figures(pair: tuple[str, str], rows: list[Sequence[Any]]) -> FieldStat:
    """One field's figures from its value groups (ascending); p10 by nearest rank."""
    count = sum(int(r[3]) for r in rows)
    rank, seen, p10 = max(1, (count + 9) // 10), 0, 0.0  # ceil(count / 10), exactly
    for r in rows:
        seen += int(r[3])
        if seen >= rank:
            p10 = float(r[2]) / SCALE
            break
    return FieldStat(
        source=pair[0],
        field=pair[1],
        count=count,
        mean=sum(float(r[4]) for r in rows) / count,
        p10=p10,
        below=sum(int(r[5]) for r in rows),
        threshold=float(rows[0][6]),
    )


def fields_of_query(count: int) -> str:
    """Fields of ``count`` jobs, each given as (source, job_id)."""
    pairs = ",".join(["(?, ?)"] * count)
    return f"""SELECT c.source, c.job_id, f.field, f.confidence, f.value FROM job_fields f
    JOIN completions c ON c.id = f.completion_id
    WHERE (c.source, c.job_id) IN (VALUES {pairs}) ORDER BY f.field"""  # noqa: S608


async def fields_of(
    read: Callable[[str, Sequence[Any]], Awaitable[list[Any]]], keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], list[FieldValue]]:
    """The extracted fields of these (source, job_id) jobs, by job, ``MAX_JOBS_PER_READ`` jobs
    a statement."""
    found: dict[tuple[str, str], list[FieldValue]] = {}
    for start in range(0, len(keys), MAX_JOBS_PER_READ):
        chunk = keys[start : start + MAX_JOBS_PER_READ]
        flat = [part for key in chunk for part in key]
        found.update(group_fields(await read(fields_of_query(len(chunk)), flat)))
    return found


def group_fields(rows: Sequence[Any]) -> dict[tuple[str, str], list[FieldValue]]:
    found: dict[tuple[str, str], list[FieldValue]] = {}
    for source, job_id, field, confidence, value in rows:
        found.setdefault((source, job_id), []).append(FieldValue(field, confidence, value))
    return found
