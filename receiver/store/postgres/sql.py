"""SQL of the PostgreSQL store: the SQLite statements where both dialects agree, its own elsewhere.

The shared statements (``receiver.store.sql``, ``.queries`` and the others beside them) use ``?``
placeholders; ``numbered``
turns them into asyncpg's ``$1, $2, ...``. PostgreSQL's own statements are the upserts (jsonb
metadata), the claims (``FOR UPDATE SKIP LOCKED``, so replicas never lease the same row) and the
few places where SQLite's functions differ (``max`` of two values, ``json_each``).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from receiver.store import circuits, codec, fields, history, queries, reprocesses, sql

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event
    from receiver.store.rows import JobFilter, JobKey

# The event stream resumes after the last completion id it sent, so it must never read id 12
# while id 11 is still uncommitted (concurrent transactions commit out of id order). Ingests
# hold this advisory lock shared from a completion's insert to their commit, never waiting for
# each other; stream reads take it exclusively, so they wait until no completion is in flight.
COMPLETION_ORDER_LOCK = 0x6A6F62686F6F6B02
LOCK_COMPLETIONS_SHARED = f"SELECT pg_advisory_xact_lock_shared({COMPLETION_ORDER_LOCK})"
LOCK_COMPLETIONS = f"SELECT pg_advisory_xact_lock({COMPLETION_ORDER_LOCK})"

_PLACEHOLDER = re.compile(r"\?")


@functools.lru_cache(maxsize=256)
def numbered(query: str) -> str:
    """``query`` with each ``?`` placeholder replaced by ``$1``, ``$2``, ... in order."""
    count = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(count)}", query)


# An inserted delivery answers a row, a duplicate none: one round trip, where SQLite reads the
# change count instead.
INSERT_DELIVERY = numbered(sql.INSERT_DELIVERY_ROW) + "RETURNING 1\n"


def _rank(column: str) -> str:
    return f"(CASE {column} WHEN 'queued' THEN 0 WHEN 'running' THEN 1 ELSE 2 END)"


_FORWARD = f"jobs.terminal_at IS NULL AND {_rank('excluded.state')} >= {_rank('jobs.state')}"

UPSERT_JOB = f"""
INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, created_at, updated_at,
                  last_news_at, terminal_at, progress_done, progress_total, expected_pages,
                  next_poll_at, error_code, id)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $7, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (source, job_id) DO UPDATE SET
    state = CASE WHEN {_FORWARD} THEN excluded.state ELSE jobs.state END,
    provider_status = CASE WHEN {_FORWARD} THEN excluded.provider_status
                           ELSE jobs.provider_status END,
    error = CASE WHEN jobs.terminal_at IS NULL THEN coalesce(excluded.error, jobs.error)
                 ELSE jobs.error END,
    error_code = CASE WHEN jobs.terminal_at IS NULL
                      THEN coalesce(excluded.error_code, jobs.error_code) ELSE jobs.error_code END,
    terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
    metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
    updated_at = excluded.updated_at,
    last_news_at = excluded.last_news_at,
    progress_done = coalesce(excluded.progress_done, jobs.progress_done),
    progress_total = coalesce(excluded.progress_total, jobs.progress_total),
    expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
    next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
    poll_attempts = CASE WHEN excluded.next_poll_at IS NULL THEN jobs.poll_attempts ELSE 0 END
RETURNING id, state, terminal_at - created_at
"""  # noqa: S608
"""A job's news, with the id ``SELECT_JOB_ID`` read or ``NEXT_JOB_ID`` gave it ($14): the row
answers the id it keeps (another transaction's, if that one inserted the job first)."""

SELECT_JOB_ID = numbered(sql.SELECT_JOB_ID)
NEXT_JOB_ID = "SELECT nextval('jobs_id_seq')"
MOVE_DELIVERY = "UPDATE deliveries SET job = $1 WHERE source = $2 AND message_id = $3"
JOB_STATE_BY_ID = "SELECT state FROM jobs WHERE id = $1"

INSERT_COMPLETION = """
INSERT INTO completions (job, source, job_id, state, provider_status, metadata, error,
                         created_at, next_attempt_at, phase, result_ref, error_code, traceparent)
SELECT id, source, job_id, state, provider_status, metadata, error, $2::double precision,
       $2::double precision, $3::text, $4::text, error_code, $5::text
FROM jobs WHERE id = $1
ON CONFLICT (job) DO NOTHING RETURNING id
"""

_COMPLETION_COLUMNS = """id, source, job_id, state, provider_status, metadata, error, created_at,
    phase, result_path, result_sha256, result_bytes, attempts, result_ref, traceparent,
    resolved_at, resolve_seconds, error_code"""
_DISPATCH_COLUMNS = codec.DISPATCH_COLUMNS

# A CTE with FOR UPDATE is evaluated once; SKIP LOCKED passes over rows another replica is
# claiming, and a row claimed meanwhile is re-checked against its new lease and left out.
CLAIM_COMPLETIONS = f"""
WITH due AS (
    SELECT id AS due_id FROM completions
    WHERE phase = 'resolving' AND next_attempt_at <= $3
      AND (lease_until IS NULL OR lease_until < $4)
    ORDER BY next_attempt_at LIMIT $5
    FOR UPDATE SKIP LOCKED)
UPDATE completions SET lease_owner = $1, lease_until = $2, attempts = attempts + 1
FROM due WHERE id = due_id
RETURNING {_COMPLETION_COLUMNS}
"""  # noqa: S608

CLAIM_DISPATCHES = f"""
WITH due AS (
    SELECT d.id AS due_id FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready'
      AND ((d.state = 'pending' AND d.next_attempt_at <= $4)
           OR (d.state = 'running' AND d.lease_until < $5))
      AND d.handler <> ALL($7::text[])
      AND NOT EXISTS (SELECT 1 FROM circuits k WHERE k.handler = d.handler AND k.state <> 'closed')
    ORDER BY d.next_attempt_at LIMIT $6
    FOR UPDATE OF d SKIP LOCKED)
UPDATE dispatches SET state = 'running', lease_owner = $1, lease_until = $2,
    attempts = attempts + 1, updated_at = $3
FROM due WHERE id = due_id
RETURNING {_DISPATCH_COLUMNS}
"""  # noqa: S608

COMPLETIONS_BY_ID = f"{sql.SELECT_COMPLETION} WHERE id = ANY($1::bigint[])"

RELEASE_DISPATCHES = """
UPDATE dispatches SET state = 'pending', attempts = greatest(attempts - 1, 0),
    lease_owner = NULL, lease_until = NULL
WHERE lease_owner = $1 AND state = 'running'
"""

RELEASE_COMPLETIONS = """
UPDATE completions SET attempts = greatest(attempts - 1, 0), lease_owner = NULL,
    lease_until = NULL
WHERE lease_owner = $1 AND phase = 'resolving'
"""

NEXT_DUE = """
SELECT min(t) FROM (
    SELECT min(next_attempt_at) AS t FROM completions WHERE phase = 'resolving'
    UNION ALL
    SELECT min(coalesce(CASE WHEN d.state = 'running' THEN d.lease_until END, d.next_attempt_at))
    FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready' AND d.state IN ('pending', 'running')
      AND d.handler <> ALL($1::text[])
      AND NOT EXISTS (SELECT 1 FROM circuits k WHERE k.handler = d.handler AND k.state <> 'closed')
    UNION ALL
    SELECT min(k.retry_at) FROM circuits k WHERE k.state <> 'closed'
      AND k.handler <> ALL($1::text[]) AND EXISTS (
        SELECT 1 FROM dispatches d JOIN completions c ON c.id = d.completion_id
        WHERE d.handler = k.handler AND c.phase = 'ready' AND d.state IN ('pending', 'running'))
    UNION ALL
    SELECT min(lease_until) FROM completions WHERE phase = 'resolving' AND lease_until IS NOT NULL
) AS due
"""

COMPLETION_FOR = numbered(f"{sql.SELECT_COMPLETION} WHERE job = {sql.JOB_KEY}")
# Two replicas purging at once take different jobs instead of the same ones twice.
PURGEABLE = f"{numbered(queries.PURGEABLE)} FOR UPDATE OF j SKIP LOCKED"
FORGET_RESULTS = "UPDATE completions SET result_path = NULL WHERE id = ANY($1::bigint[])"

# ``->>`` gives a metadata value as text, which is what the SQLite lookup imitates.
_METADATA_HOLDS = "(j.metadata ->> ?) = ?"


def with_metadata(query: str) -> str:
    """A shared read query, numbered, with PostgreSQL's metadata lookup."""
    return numbered(query.replace(queries.METADATA_HOLDS, _METADATA_HOLDS))


def list_jobs_query(where: JobFilter, limit: int, after: JobKey | None) -> tuple[str, list[Any]]:
    """The shared keyset listing, with PostgreSQL's metadata lookup."""
    query, params = queries.list_jobs_query(where, limit, after)
    return with_metadata(query), params


CIRCUIT_FAILED = numbered(circuits.FAILED)
CIRCUIT_SUCCEEDED = numbered(circuits.SUCCEEDED)
TAKE_PROBES = numbered(circuits.TAKE_PROBES)
CLAIM_PROBE = numbered(
    circuits.CLAIM_PROBE.replace("LIMIT 1)", "LIMIT 1 FOR UPDATE OF d SKIP LOCKED)")
)
NO_PROBE = numbered(circuits.NO_PROBE)
PROBE_NOW = numbered(circuits.PROBE_NOW)
PROBE_DUE = numbered(circuits.PROBE_DUE)

RESOLVE_COMPLETION = numbered(sql.RESOLVE_COMPLETION)
DELETE_FIELDS = numbered(fields.DELETE_FIELDS)
INSERT_FIELD = numbered(fields.INSERT_FIELD)

CLAIM_REPROCESS = numbered(reprocesses.CLAIM.replace("OR (? AND", "OR (?::boolean AND"))
FINISH_REPROCESS = numbered(reprocesses.FINISH)

RECORD_ATTEMPT = numbered(history.RECORD_ATTEMPT)
# A bucket's number: PostgreSQL's CAST rounds, so floor.
_BUCKET = "floor({} / ?)"
COMPLETED_OVER_TIME = numbered(history.completed_over_time(_BUCKET))


def outcomes_over_time(sources: Sequence[str] | None) -> str:
    return numbered(history.outcomes_over_time(_BUCKET, sources))


def errors_over_time(sources: Sequence[str] | None) -> str:
    return numbered(history.errors_over_time(_BUCKET, sources))


def completion_args(event: Event, at: float, resolve: bool, job: int) -> tuple[Any, ...]:
    p = codec.completion_params(event, at, resolve, job)
    return (p["job"], p["now"], p["phase"], p["result_ref"], p["traceparent"])
