"""The PostgreSQL store's own SQL, and ``DIALECT``: how it speaks the shared SQL.

The shared statements (``receiver.store.sql``, ``.queries`` and the others beside them) use ``?``
placeholders, which ``DIALECT`` numbers for asyncpg (``$1, $2, ...``), with PostgreSQL's
metadata lookup and row locks. PostgreSQL's own statements are its webhook ingest (``ingest``:
jsonb metadata, a job id from a sequence, RETURNING) and the statements the dialect maps the
shared claims and next-due read to (``FOR UPDATE SKIP LOCKED``, so replicas never lease the
same row; arrays where SQLite reads JSON).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import codec, queries, sql
from receiver.store.connector import PostgresDialect, numbered

if TYPE_CHECKING:
    from receiver.models import Event

# The event stream resumes after the last completion id it sent, so it must never read id 12
# while id 11 is still uncommitted (concurrent transactions commit out of id order). Ingests
# hold this advisory lock shared from a completion's insert to their commit, never waiting for
# each other; stream reads take it exclusively, so they wait until no completion is in flight.
COMPLETION_ORDER_LOCK = 0x6A6F62686F6F6B02
LOCK_COMPLETIONS_SHARED = f"SELECT pg_advisory_xact_lock_shared({COMPLETION_ORDER_LOCK})"
LOCK_COMPLETIONS = f"SELECT pg_advisory_xact_lock({COMPLETION_ORDER_LOCK})"

# An inserted delivery answers a row, a duplicate none: one round trip, where SQLite reads the
# change count instead.
INSERT_DELIVERY = numbered(sql.INSERT_DELIVERY_ROW) + "RETURNING 1\n"


UPSERT_JOB = (
    """
INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, created_at, updated_at,
                  last_news_at, terminal_at, progress_done, progress_total, expected_pages,
                  next_poll_at, error_code, id)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $7, $7, $8, $9, $10, $11, $12, $13, $14)
"""
    + sql.job_news("jobhook_merge_patch")
    + "RETURNING id, state, terminal_at - created_at\n"
)
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
RETURNING {sql.COMPLETION_COLUMNS}
"""  # noqa: S608

CLAIM_DISPATCHES = f"""
WITH due AS (
    SELECT d.id AS due_id FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready'
      AND ((d.state = 'pending' AND d.next_attempt_at <= $4)
           OR (d.state = 'running' AND d.lease_until < $5))
      AND d.handler <> ALL($6::text[])
      AND NOT EXISTS (SELECT 1 FROM circuits k WHERE k.handler = d.handler AND k.state <> 'closed')
    ORDER BY d.next_attempt_at LIMIT $7
    FOR UPDATE OF d SKIP LOCKED)
UPDATE dispatches SET state = 'running', lease_owner = $1, lease_until = $2,
    attempts = attempts + 1, updated_at = $3
FROM due WHERE id = due_id
RETURNING {_DISPATCH_COLUMNS}
"""  # noqa: S608

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
      AND k.handler <> ALL($2::text[]) AND EXISTS (
        SELECT 1 FROM dispatches d JOIN completions c ON c.id = d.completion_id
        WHERE d.handler = k.handler AND c.phase = 'ready' AND d.state IN ('pending', 'running'))
    UNION ALL
    SELECT min(lease_until) FROM completions WHERE phase = 'resolving' AND lease_until IS NOT NULL
) AS due
"""


def completion_args(event: Event, at: float, resolve: bool, job: int) -> tuple[Any, ...]:
    p = codec.completion_params(event, at, resolve, job)
    return (p["job"], p["now"], p["phase"], p["result_ref"], p["traceparent"])


# ``->>`` gives a metadata value as text, which the SQLite lookup imitates.
_METADATA_HOLDS = "(j.metadata ->> ?) = ?"

DIALECT = PostgresDialect(
    {
        sql.CLAIM_COMPLETIONS: CLAIM_COMPLETIONS,
        sql.CLAIM_DISPATCHES: CLAIM_DISPATCHES,
        sql.NEXT_DUE: NEXT_DUE,
    },
    metadata=(queries.METADATA_HOLDS, _METADATA_HOLDS),
)
"""How the PostgreSQL store speaks the shared SQL."""
