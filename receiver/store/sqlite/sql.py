"""The SQLite store's own SQL: its webhook ingest (``operations.ingest``), its claims and its
next-due read (where the planner needs naming its index), and the statements its owner runs at
start. The rest of what it runs is the shared SQL (``receiver.store.sql`` and the modules beside
it), as ``DIALECT`` speaks it."""

from __future__ import annotations

from receiver.store import codec, sql
from receiver.store.connector import SQLiteDialect

_DISPATCH_COLUMNS = codec.DISPATCH_COLUMNS

_INSERT_JOB_ROW = """
INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, created_at, updated_at,
                  last_news_at, terminal_at, progress_done, progress_total, expected_pages,
                  next_poll_at, error_code)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
"""

INSERT_NEW_JOB = _INSERT_JOB_ROW + "ON CONFLICT DO NOTHING\n"
"""A job's first news (``job_args``): the row as UPSERT_JOB inserts it; nothing for a known job."""

UPSERT_JOB = (
    _INSERT_JOB_ROW + sql.job_news("json_patch") + "RETURNING state, terminal_at - created_at\n"
)

INSERT_COMPLETION = """
INSERT INTO completions (job, source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref, error_code, traceparent)
SELECT id, source, job_id, state, provider_status, metadata, error, :now, :now, :phase,
       :result_ref, error_code, :traceparent
FROM jobs WHERE id = :job
ON CONFLICT (job) DO NOTHING
"""
"""One row, or none when the job already has its completion: its id is the cursor's lastrowid."""

INSERT_NEW_COMPLETION = """
INSERT INTO completions (source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref, error_code, traceparent, job)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT (job) DO NOTHING
"""
"""INSERT_COMPLETION for a job created in the same transaction: its row is ``job_args``' first
seven values (then phase, result reference, error code, traceparent and the job's id), so they
are inserted as they are instead of read back."""

CLAIM_COMPLETIONS = f"""
UPDATE completions SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM completions
    WHERE phase = 'resolving' AND next_attempt_at <= ?
      AND (lease_until IS NULL OR lease_until < ?)
    ORDER BY next_attempt_at LIMIT ?)
RETURNING {sql.COMPLETION_COLUMNS}
"""  # noqa: S608

# INDEXED BY and CROSS JOIN: SQLite finds dispatches through dispatches_due and keeps them as
# the outer loop whatever its statistics say. Once a store of a million jobs had been ANALYZEd
# (an operator's routine step), the planner chose to scan every completion instead: seconds for
# CLAIM_DISPATCHES, on the event loop's thread inside the write transaction every webhook waits
# for, and for NEXT_DUE, which then read every dispatch even with dispatches outside
# (bench.prefill's store; milliseconds as written here).
CLAIM_DISPATCHES = f"""
UPDATE dispatches SET state = 'running', lease_owner = ?, lease_until = ?,
    attempts = attempts + 1, updated_at = ?
WHERE id IN (
    SELECT d.id FROM dispatches d INDEXED BY dispatches_due
    CROSS JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready'
      AND ((d.state = 'pending' AND d.next_attempt_at <= ?)
           OR (d.state = 'running' AND d.lease_until < ?))
      AND d.handler NOT IN (SELECT value FROM json_each(?))
      AND NOT EXISTS (SELECT 1 FROM circuits k WHERE k.handler = d.handler AND k.state <> 'closed')
    ORDER BY d.next_attempt_at LIMIT ?)
RETURNING {_DISPATCH_COLUMNS}
"""  # noqa: S608

NEXT_DUE = """
SELECT min(t) FROM (
    SELECT min(next_attempt_at) AS t FROM completions WHERE phase = 'resolving'
    UNION ALL
    SELECT min(coalesce(CASE WHEN d.state = 'running' THEN d.lease_until END, d.next_attempt_at))
    FROM dispatches d INDEXED BY dispatches_due CROSS JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready' AND d.state IN ('pending', 'running')
      AND d.handler NOT IN (SELECT value FROM json_each(?))
      AND NOT EXISTS (SELECT 1 FROM circuits k WHERE k.handler = d.handler AND k.state <> 'closed')
    UNION ALL
    SELECT min(k.retry_at) FROM circuits k WHERE k.state <> 'closed'
      AND k.handler NOT IN (SELECT value FROM json_each(?)) AND EXISTS (
        SELECT 1 FROM dispatches d INDEXED BY dispatches_due
        CROSS JOIN completions c ON c.id = d.completion_id
        WHERE d.handler = k.handler AND c.phase = 'ready' AND d.state IN ('pending', 'running'))
    UNION ALL
    SELECT min(lease_until) FROM completions WHERE phase = 'resolving' AND lease_until IS NOT NULL
)
"""

# The embedded store's owner proved that no other process uses it (receiver.store.sqlite.ownership):
# every claim left in it belongs to a process that is gone.
TAKE_BACK_ALL = (
    """UPDATE dispatches SET state = 'pending', lease_owner = NULL, lease_until = NULL
       WHERE state = 'running'""",
    """UPDATE completions SET lease_owner = NULL, lease_until = NULL
       WHERE phase = 'resolving' AND lease_owner IS NOT NULL""",
    "DELETE FROM leases",
    "DELETE FROM replicas",
)


DIALECT = SQLiteDialect(
    {
        sql.CLAIM_COMPLETIONS: CLAIM_COMPLETIONS,
        sql.CLAIM_DISPATCHES: CLAIM_DISPATCHES,
        sql.NEXT_DUE: NEXT_DUE,
    }
)
"""How the SQLite store speaks the shared SQL."""
