"""What the operator console reads besides the admin API's queries: each handler attempt as it
ended (the ``attempts`` table the dispatcher's ``finish_dispatch`` writes), completions over
time, and dead deliveries grouped and listed.

An attempt row is written in the same transaction as the dispatch's own update, by the
dispatcher, never on the webhook path. Times are Unix seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import sql
from receiver.store.queries import FAILURE_CODE
from receiver.store.rows import OutcomeBucket

if TYPE_CHECKING:
    from collections.abc import Sequence

# Before the dispatch's UPDATE (which clears its lease): the attempt that is ending, if the
# caller still holds the lease; ``attempts`` already counts it (a claim increments it).
RECORD_ATTEMPT = """
INSERT INTO attempts (dispatch_id, attempt, outcome, error, error_code, next_attempt_at, ended_at)
SELECT id, attempts, ?, ?, ?, ?, ? FROM dispatches WHERE id = ? AND lease_owner = ?
"""
ATTEMPTS_FOR = """
SELECT d.handler, a.attempt, a.outcome, a.error, a.error_code, a.next_attempt_at, a.ended_at
FROM attempts a JOIN dispatches d ON d.id = a.dispatch_id
JOIN completions c ON c.id = d.completion_id
WHERE c.job = (SELECT id FROM jobs WHERE source = ? AND job_id = ?)
ORDER BY a.ended_at, a.id
"""
# Terminal jobs per bucket of ``width`` seconds: how many, and created-to-terminal seconds.
_COMPLETED_OVER_TIME = """
SELECT {bucket} AS b, count(*),
       avg(terminal_at - created_at), max(terminal_at - created_at)
FROM jobs WHERE terminal_at IS NOT NULL AND terminal_at >= ?
GROUP BY b ORDER BY b
"""
# Terminal jobs per bucket: how many, succeeded, failed, and the nearest-rank p50 and p95 of
# their known-to-terminal seconds (the smallest value whose rank reaches fraction x count).
_OUTCOMES_OVER_TIME = """
WITH t AS (
    SELECT {bucket} AS b, state, terminal_at - created_at AS s
    FROM jobs j WHERE terminal_at IS NOT NULL AND terminal_at >= ? {only}
), r AS (
    SELECT b, state, s, row_number() OVER (PARTITION BY b ORDER BY s) AS rn,
           count(*) OVER (PARTITION BY b) AS n
    FROM t
)
SELECT b, count(*), sum(CASE WHEN state = 'succeeded' THEN 1 ELSE 0 END),
       sum(CASE WHEN state IN ('failed', 'cancelled', 'expired') THEN 1 ELSE 0 END),
       min(CASE WHEN rn >= 0.5 * n THEN s END), min(CASE WHEN rn >= 0.95 * n THEN s END)
FROM r GROUP BY b ORDER BY b
"""
# Errors per bucket and code: failed jobs (when they became terminal, by the code the admin
# API's stats use) and failed handler attempts (when they ended).
_ERRORS_OVER_TIME = f"""
SELECT b, code, count(*) FROM (
    SELECT {{jobs}} AS b, {FAILURE_CODE} AS code
    FROM jobs j LEFT JOIN completions c ON c.job = j.id
    WHERE j.terminal_at IS NOT NULL AND j.terminal_at >= ? {{only}}
    UNION ALL
    SELECT {{attempts}}, coalesce(a.error_code, 'unknown') FROM attempts a
    WHERE a.ended_at >= ? AND a.outcome <> 'succeeded' {{only_attempts}}
) AS e WHERE code IS NOT NULL
GROUP BY b, code ORDER BY b, code
"""  # noqa: S608
_DEAD_WHERE = """d.state = 'dead' AND (CAST(? AS TEXT) IS NULL OR d.handler = ?)
  AND (CAST(? AS TEXT) IS NULL OR coalesce(d.error_code, 'unknown') = ?)"""
DEAD_GROUPS = """
SELECT d.handler, coalesce(d.error_code, 'unknown'), count(*), max(d.updated_at)
FROM dispatches d WHERE d.state = 'dead' {only}
GROUP BY d.handler, coalesce(d.error_code, 'unknown') ORDER BY count(*) DESC, d.handler
"""
DEAD_LIST = f"""
SELECT c.source, c.job_id, d.handler, d.attempts, d.last_error,
       coalesce(d.error_code, 'unknown'), d.updated_at
FROM dispatches d JOIN completions c ON c.id = d.completion_id
WHERE {_DEAD_WHERE} {{only}}
ORDER BY d.updated_at DESC, d.id DESC LIMIT ?
"""  # noqa: S608


def record_params(finish: Sequence[Any]) -> tuple[Any, ...]:
    """The attempt's values from ``codec.finish_params``' tuple
    (state, next_attempt_at, error, code, at, finished, dispatch_id, owner)."""
    state, next_at, error, code, at, _, dispatch_id, owner = finish
    outcome = "retry" if state == "pending" else state
    return (outcome, error, code, next_at, at, dispatch_id, owner)


def outcome_bucket(r: Sequence[Any], width: float) -> OutcomeBucket:
    return OutcomeBucket(r[0] * width, r[1], r[2], r[3], r[4], r[5])


# A dispatch's (or its attempt's) source is its completion's.
_DISPATCH_OF = "d.completion_id IN (SELECT id FROM completions WHERE source IN ({marks}))"
_ATTEMPT_OF = f"""a.dispatch_id IN (SELECT d.id FROM dispatches d
    WHERE {_DISPATCH_OF})"""  # noqa: S608


def _of(condition: str, sources: Sequence[str] | None) -> str:
    """``condition`` (about ``{marks}``, the sources' placeholders) for the rows of ``sources``
    only (a token limited to them), as ``sql.in_sources`` puts it; nothing when None."""
    if sources is None:
        return ""
    if not sources:
        return " AND 1 = 0"
    return " AND " + condition.format(marks=",".join("?" * len(sources)))


def dead_params(handler: str | None, code: str | None, limit: int) -> tuple[Any, ...]:
    return (handler, handler, code, code, limit)


def dead_groups_query(sources: Sequence[str] | None = None) -> tuple[str, list[Any]]:
    """Dead dispatches by handler and code; of ``sources``' jobs only, when given."""
    return DEAD_GROUPS.replace("{only}", _of(_DISPATCH_OF, sources)), list(sources or ())


def dead_list_query(
    handler: str | None, code: str | None, limit: int, sources: Sequence[str] | None = None
) -> tuple[str, list[Any]]:
    """Dead dispatches newest first; of ``sources``' jobs only, when given."""
    *where, limit_ = dead_params(handler, code, limit)
    return sql.scoped(DEAD_LIST, sources, "c.source"), [*where, *(sources or ()), limit_]


def over_time_params(
    width: float, since: float, sources: Sequence[str] | None, parts: int = 1
) -> list[Any]:
    """The parameters of a statement over time: per part (``errors_over_time`` has two), the
    bucket width, the start and the sources (if any)."""
    return [width, since, *(sources or ())] * parts


def completed_over_time(bucket: str) -> str:
    """The statement, with ``bucket`` (the dialect's bucket number of ``{}``: a column over
    the ``width`` parameter, rounded down) filled in."""
    return _COMPLETED_OVER_TIME.format(bucket=bucket.format("terminal_at"))


def outcomes_over_time(bucket: str, sources: Sequence[str] | None = None) -> str:
    """The statement; of ``sources``' jobs only, when given (``over_time_params``)."""
    query = _OUTCOMES_OVER_TIME.format(bucket=bucket.format("terminal_at"), only="{only}")
    return sql.scoped(query, sources)


def errors_over_time(bucket: str, sources: Sequence[str] | None = None) -> str:
    """The statement; of ``sources``' jobs only, when given (``over_time_params``, two parts)."""
    return _ERRORS_OVER_TIME.format(
        jobs=bucket.format("j.terminal_at"), attempts=bucket.format("a.ended_at"),
        only=sql.in_sources(sources)[0], only_attempts=_of(_ATTEMPT_OF, sources),
    )  # fmt: skip
