"""The read queries of the admin API, for both backends: job listings, deliveries, fields,
stats, backlog and retention.

The SQL sticks to what PostgreSQL also speaks (row-value comparison for the keyset, CASE
instead of boolean sums), except the metadata lookup: ``METADATA_HOLDS`` is SQLite's
``json_each``, which the PostgreSQL store swaps for ``metadata ->> key``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from receiver.models import TERMINAL_STATES
from receiver.store import codec, fields, sql
from receiver.store.rows import Backlog, DeliveryRow, ErrorCount, JobListing, JobStats

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from receiver.store.rows import JobFilter, JobKey

# A job's normalised error: the provider's code, else jobhook's (result_too_large...) from its
# completion, else the failed state itself (provider_failed); where it arose beside it.
_FAILED = "coalesce(c.state, j.state) IN ('failed', 'cancelled', 'expired')"
FAILURE_CODE = f"""coalesce(j.error_code, c.error_code,
    CASE WHEN {_FAILED} THEN 'provider_' || coalesce(c.state, j.state) END)"""
FAILURE_WHERE = f"""CASE WHEN j.error_code IS NOT NULL THEN 'provider'
    WHEN c.error_code IS NOT NULL THEN coalesce(c.error_where, 'provider')
    WHEN {_FAILED} THEN 'provider' END"""
_FAILING_DISPATCH = """EXISTS (SELECT 1 FROM dispatches d
    WHERE d.completion_id = c.id AND d.error_code = ?)"""

_LISTING = f"""
SELECT j.source, j.job_id, j.state, j.provider_status, j.metadata, j.created_at, j.updated_at,
       j.last_news_at, j.terminal_at, j.progress_done, j.progress_total, j.expected_pages,
       j.error, j.poll_attempts,
       c.phase, c.confidence, c.result_path, c.result_sha256, c.result_bytes,
       coalesce(j.error_code, c.error_code), {FAILURE_CODE}, {FAILURE_WHERE},
       coalesce(c.error, j.error)
FROM jobs j LEFT JOIN completions c ON c.job = j.id
"""  # noqa: S608

SELECT_DELIVERIES = f"""
SELECT message_id, state, provider_status, received_at FROM deliveries
WHERE job = {sql.JOB_KEY} ORDER BY received_at, message_id
"""  # noqa: S608

_STATES_BY_SOURCE = """
SELECT state, source, count(*) FROM jobs j WHERE created_at >= ? {only} GROUP BY state, source
"""
_DURATION = "(terminal_at - created_at)"
_DURATIONS = f"""
SELECT count(*), avg({_DURATION}) FROM jobs j
WHERE created_at >= ? AND terminal_at IS NOT NULL {{only}}
"""  # noqa: S608
_NTH_DURATION = f"""
SELECT {_DURATION} AS d FROM jobs j WHERE created_at >= ? AND terminal_at IS NOT NULL {{only}}
ORDER BY d LIMIT 1 OFFSET ?
"""  # noqa: S608
_HANDLER_FAILURES = """
SELECT d.handler,
       sum(CASE WHEN d.state = 'dead' THEN 1 ELSE 0 END),
       sum(CASE WHEN d.state IN ('pending', 'running') AND d.last_error IS NOT NULL
                THEN 1 ELSE 0 END)
FROM dispatches d
JOIN completions c ON c.id = d.completion_id
JOIN jobs j ON j.id = c.job
WHERE j.created_at >= ? {only}
GROUP BY d.handler ORDER BY d.handler
"""

_ERRORS = f"""
SELECT code, origin, source, handler, count(*) FROM (
    SELECT {FAILURE_CODE} AS code, {FAILURE_WHERE} AS origin, j.source AS source,
           CAST(NULL AS TEXT) AS handler
    FROM jobs j LEFT JOIN completions c ON c.job = j.id
    WHERE j.created_at >= ? {{only}}
    UNION ALL
    SELECT d.error_code, 'handler', j.source, d.handler
    FROM dispatches d
    JOIN completions c ON c.id = d.completion_id
    JOIN jobs j ON j.id = c.job
    WHERE j.created_at >= ? AND d.error_code IS NOT NULL AND d.state <> 'succeeded' {{only}}
) AS e WHERE code IS NOT NULL
GROUP BY code, origin, source, handler ORDER BY code, origin, source, handler
"""  # noqa: S608

# A metadata value as text, the way PostgreSQL's ``->>`` gives it (true, 5, 1.5, "abc" as abc).
METADATA_HOLDS = """EXISTS (SELECT 1 FROM json_each(j.metadata) AS m WHERE m.key = ?
    AND (CASE m.type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
         ELSE CAST(m.value AS TEXT) END) = ?)"""

COMPLETIONS_AFTER = f"{sql.SELECT_COMPLETION} WHERE id > ? {{only}} ORDER BY id LIMIT ?"
LAST_COMPLETION_ID = "SELECT coalesce(max(id), 0) FROM completions"

# The oldest work waiting, through the dispatches waiting only, one state at a time: an ANALYZEd
# store counts two states in dispatches_due (nearly all done, some dead), so SQLite read every
# dispatch for a join on ``state IN ('pending', 'running')`` (tens of milliseconds on
# bench.prefill's store, on every metrics scrape: a read that long keeps its snapshot of the WAL,
# which the checkpoint's held pass waits for), and uses the index for one state at a time.
BACKLOG = """
SELECT
    (SELECT count(*) FROM completions WHERE phase = 'resolving'),
    (SELECT count(*) FROM dispatches WHERE state = 'pending'),
    (SELECT count(*) FROM dispatches WHERE state = 'running'),
    (SELECT count(*) FROM dispatches WHERE state = 'dead'),
    (SELECT min(t) FROM (
        SELECT min(created_at) AS t FROM completions WHERE phase = 'resolving'
        UNION ALL
        SELECT min(created_at) FROM completions WHERE id IN (
            SELECT d.completion_id FROM dispatches d WHERE d.state = 'pending'
            UNION ALL
            SELECT d.completion_id FROM dispatches d WHERE d.state = 'running')) AS oldest)
"""

# Completions that still need their job API's confirmation (no result reference yet).
CONFIRMATIONS_DUE = """
SELECT source, count(*) FROM completions
WHERE phase = 'resolving' AND result_ref IS NULL GROUP BY source
"""

# Delivered: resolved, and every dispatch succeeded and has not been touched since ``before``
# (a replay moves updated_at). Dead dispatches are not delivered: they stay until replayed.
PURGEABLE = """
SELECT j.id, c.id, c.result_path
FROM jobs j LEFT JOIN completions c ON c.job = j.id
WHERE j.terminal_at IS NOT NULL AND j.terminal_at < ?
  AND (c.id IS NULL OR (c.phase = 'ready' AND NOT EXISTS (
        SELECT 1 FROM dispatches d WHERE d.completion_id = c.id
        AND (d.state <> 'succeeded' OR d.updated_at >= ?))))
ORDER BY j.terminal_at LIMIT ? /*pg: FOR UPDATE OF j SKIP LOCKED */
"""
"""Two replicas purging at once take different jobs, not the same ones twice."""
DELETE_DELIVERIES = "DELETE FROM deliveries WHERE job = ?"
DELETE_DISPATCHES = "DELETE FROM dispatches WHERE completion_id = ?"
DELETE_COMPLETION = "DELETE FROM completions WHERE id = ?"
DELETE_JOB = "DELETE FROM jobs WHERE id = ?"

DELIVERED_RESULTS = """
SELECT c.id, c.result_path FROM completions c
WHERE c.result_path IS NOT NULL AND c.phase = 'ready'
  AND EXISTS (SELECT 1 FROM dispatches d WHERE d.completion_id = c.id)
  AND NOT EXISTS (SELECT 1 FROM dispatches d
                  WHERE d.completion_id = c.id AND d.state <> 'succeeded')
ORDER BY c.id LIMIT ?
"""


def list_jobs_query(where: JobFilter, limit: int, after: JobKey | None) -> tuple[str, list[Any]]:
    """The keyset-paged SELECT for ``where``: newest first (or oldest first), ties broken by
    source and job id."""
    clauses, params = job_clauses(where)
    beyond, order = (">", "ASC") if where.oldest_first else ("<", "DESC")
    if after is not None:
        clauses.append(f"(j.created_at, j.source, j.job_id) {beyond} (?, ?, ?)")
        params += list(after)
    where_sql = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    query = f"""{_LISTING} {where_sql}
    ORDER BY j.created_at {order}, j.source {order}, j.job_id {order} LIMIT ?"""
    return query, [*params, limit]


def job_clauses(where: JobFilter) -> tuple[list[str], list[Any]]:
    """``where`` as SQL conditions on ``jobs j`` joined with ``completions c``, and their values."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (("j.source = ?", where.source), ("j.job_id = ?", where.job_id),
                          ("j.state = ?", where.state),
                          ("j.created_at >= ?", where.created_after),
                          ("j.created_at < ?", where.created_before),
                          ("c.confidence >= ?", where.min_confidence)):  # fmt: skip
        if value is not None:
            clauses.append(clause)
            params.append(value)
    for key, value in where.metadata:
        clauses.append(METADATA_HOLDS)
        params += [key, value]
    if where.error_code is not None:
        clauses.append(f"({FAILURE_CODE} = ? OR {_FAILING_DISPATCH})")
        params += [where.error_code, where.error_code]
    weak = fields.field_clause(where)
    if weak is not None:
        clauses.append(weak[0])
        params += weak[1]
    if where.sources is not None:
        only, values = sql.in_sources(where.sources)
        clauses.append(only.removeprefix(" AND "))
        params += values
    return clauses, params


def listing_row(r: Sequence[Any]) -> JobListing:
    return JobListing(codec.job_row(r[:14]), *r[14:23])


def delivery_row(r: Sequence[Any]) -> DeliveryRow:
    return DeliveryRow(r[0], r[1], r[2], r[3])


def backlog_row(r: Sequence[Any]) -> Backlog:
    return Backlog(r[0], r[1], r[2], r[3], r[4])


async def job_stats(
    read: Callable[[str, Sequence[Any]], Awaitable[list[Any]]],
    since: float,
    sources: Sequence[str] | None = None,
) -> JobStats:
    """Every figure of ``/jobs/stats``, from a handful of reads; of ``sources``' jobs only when
    given (``in_sources``)."""
    only = sql.in_sources(sources)[1]

    def scoped(query: str) -> str:
        return sql.scoped(query, sources)

    by_state: dict[str, int] = {}
    by_source: dict[str, int] = {}
    for state, source, count in await read(scoped(_STATES_BY_SOURCE), (since, *only)):
        by_state[state] = by_state.get(state, 0) + count
        by_source[source] = by_source.get(source, 0) + count
    ((durations, avg),) = await read(scoped(_DURATIONS), (since, *only))
    percentiles: list[float | None] = []
    for fraction in (0.50, 0.95):
        offset = nearest_rank(fraction, durations) - 1
        rows = await read(scoped(_NTH_DURATION), (since, *only, offset))
        percentiles.append(rows[0][0] if rows else None)
    failures = {
        handler: {"dead": dead or 0, "retrying": retrying or 0}
        for handler, dead, retrying in await read(scoped(_HANDLER_FAILURES), (since, *only))
    }
    errors = await read(scoped(_ERRORS), (since, *only, since, *only))
    return JobStats(
        total=sum(by_state.values()),
        by_state=by_state,
        by_source=by_source,
        terminal=sum(n for state, n in by_state.items() if state in TERMINAL_STATES),
        succeeded=by_state.get("succeeded", 0),
        durations=durations,
        avg_seconds=avg,
        p50_seconds=percentiles[0],
        p95_seconds=percentiles[1],
        handler_failures=failures,
        errors=tuple(ErrorCount(*row) for row in errors),
    )


def nearest_rank(fraction: float, count: int) -> int:
    """The 1-based rank of the ``fraction`` percentile among ``count`` sorted values."""
    return max(1, math.ceil(fraction * count))


def completions_after_query(
    after_id: int, limit: int, sources: Sequence[str] | None = None
) -> tuple[str, list[Any]]:
    """Completions after ``after_id`` in id order (the event stream), of ``sources`` if given."""
    only = sql.in_sources(sources, "source")[1]
    return sql.scoped(COMPLETIONS_AFTER, sources, "source"), [after_id, *only, limit]


def forget_results_query(count: int) -> str:
    marks = ",".join("?" * count)
    return f"UPDATE completions SET result_path = NULL WHERE id IN ({marks})"  # noqa: S608


def field_names_query(where: JobFilter, limit: int) -> tuple[str, list[Any]]:
    """The distinct fields of the jobs ``where`` selects, alphabetical, at most ``limit``."""
    clauses, params = job_clauses(where)
    if not clauses:
        return fields.NAMES_OF_ALL, [limit]
    # The matching completions first, then their fields by primary key: a join driven from
    # job_fields would look up a job for every field row of the store.
    query = f"""SELECT DISTINCT field FROM job_fields WHERE completion_id IN (
        SELECT c.id FROM jobs j JOIN completions c ON c.job = j.id
        WHERE {" AND ".join(clauses)}) ORDER BY field LIMIT ?"""  # noqa: S608
    return query, [*params, limit]
