"""The shared SQL of the store's engine, pipeline side: what both backends run, in the words
``receiver.store.connector.Dialect`` describes (``?`` placeholders, ``greatest``, PostgreSQL's
row locks as ``/*pg: ... */`` comments), and the names of the few statements each backend
writes itself (``own``: the claims and the next-due read, in ``sqlite.sql`` and
``postgres.sql``). The admin API's reads are beside it (``queries``, ``history``, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import codec
from receiver.store.codec import now
from receiver.store.connector import own

if TYPE_CHECKING:
    from collections.abc import Sequence


def _rank(column: str) -> str:
    return f"(CASE {column} WHEN 'queued' THEN 0 WHEN 'running' THEN 1 ELSE 2 END)"


_FORWARD = f"jobs.terminal_at IS NULL AND {_rank('excluded.state')} >= {_rank('jobs.state')}"

# jobhook's own id of a job (jobs.id, sequential from the job's first sight) keys everything per
# job: its deliveries' index and its completion append at the right edge of their B-trees,
# where keys by the provider's random job id landed anywhere. The lookup from the provider's
# (source, job_id) is the one random-keyed B-tree a webhook touches (migration 13).
JOB_KEY = "(SELECT id FROM jobs WHERE source = ? AND job_id = ?)"
"""A job's id from its (source, job_id), as a scalar subquery for the statements below."""


def job_news(merge_patch: str) -> str:
    """The clause that merges a known job's news into its row, for both backends: the state
    moves forward only (queued, running, then one terminal state, kept once reached), the
    error and its code only before that, the metadata merged as a JSON merge patch
    (``merge_patch`` names the dialect's function), progress and poll times where given."""
    return f"""ON CONFLICT (source, job_id) DO UPDATE SET
    state = CASE WHEN {_FORWARD} THEN excluded.state ELSE jobs.state END,
    provider_status = CASE WHEN {_FORWARD} THEN excluded.provider_status
                           ELSE jobs.provider_status END,
    error = CASE WHEN jobs.terminal_at IS NULL THEN coalesce(excluded.error, jobs.error)
                 ELSE jobs.error END,
    error_code = CASE WHEN jobs.terminal_at IS NULL
                      THEN coalesce(excluded.error_code, jobs.error_code) ELSE jobs.error_code END,
    terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
    metadata = {merge_patch}(jobs.metadata, excluded.metadata),
    updated_at = excluded.updated_at,
    last_news_at = excluded.last_news_at,
    progress_done = coalesce(excluded.progress_done, jobs.progress_done),
    progress_total = coalesce(excluded.progress_total, jobs.progress_total),
    expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
    next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
    poll_attempts = CASE WHEN excluded.next_poll_at IS NULL THEN jobs.poll_attempts ELSE 0 END
"""


# SQLite learns what an INSERT did from its change count (cursor.rowcount, lastrowid): there a
# RETURNING clause makes each statement dearer, and a webhook runs three of them. PostgreSQL
# adds RETURNING (``postgres.sql``).
INSERT_DELIVERY_ROW = """
INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at, job)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

SELECT_JOB_ID = "SELECT id, state FROM jobs WHERE source = ? AND job_id = ?"

INSERT_DISPATCH = """
INSERT INTO dispatches (completion_id, handler, next_attempt_at, updated_at)
VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

REQUEUE_DEAD_FOR_JOB = """
UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?, updated_at = ?,
    lease_owner = NULL, lease_until = NULL
WHERE state = 'dead' AND completion_id = (SELECT id FROM completions WHERE job = ?)
"""

COMPLETION_COLUMNS = """id, source, job_id, state, provider_status, metadata, error, created_at,
    phase, result_path, result_sha256, result_bytes, attempts, result_ref, traceparent,
    resolved_at, resolve_seconds, error_code"""
SELECT_COMPLETION = f"SELECT {COMPLETION_COLUMNS} FROM completions"  # noqa: S608

SELECT_COMPLETION_FOR = f"{SELECT_COMPLETION} WHERE job = {JOB_KEY}"


def completions_by_id(count: int) -> str:
    marks = ",".join("?" * count)
    return f"{SELECT_COMPLETION} WHERE id IN ({marks})"


CLAIM_COMPLETIONS = own("claim completions")
"""Lease due completions: (owner, lease until, now, now, limit); the completions' rows."""
CLAIM_DISPATCHES = own("claim dispatches")
"""Lease due dispatches of closed circuits: (owner, lease until, now, now, now, busy handlers
(a list), limit); the dispatches' rows."""
NEXT_DUE = own("next due")
"""When the next completion or dispatch falls due: (busy handlers, busy handlers), as lists."""

SELECT_JOB = """
SELECT source, job_id, state, provider_status, metadata, created_at, updated_at, last_news_at,
       terminal_at, progress_done, progress_total, expected_pages, error, poll_attempts
FROM jobs WHERE source = ? AND job_id = ?
"""

RESOLVE_COMPLETION = """
UPDATE completions SET phase = 'ready', result_path = ?, result_sha256 = ?, result_bytes = ?,
    error = coalesce(?, error), error_code = coalesce(?, error_code), state = coalesce(?, state),
    provider_status = coalesce(?, provider_status), resolved_at = ?, confidence = ?,
    error_where = coalesce(?, error_where), resolve_seconds = ?, lease_owner = NULL,
    lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

RETRY_COMPLETION = """
UPDATE completions SET last_error = ?, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

_DISPATCH_COLUMNS = codec.DISPATCH_COLUMNS

FINISH_DISPATCH = """
UPDATE dispatches SET state = ?, next_attempt_at = coalesce(?, next_attempt_at), last_error = ?,
    error_code = ?, updated_at = ?, finished_at = ?, lease_owner = NULL, lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

RELEASE_DISPATCHES = """
UPDATE dispatches SET state = 'pending', attempts = greatest(attempts - 1, 0),
    lease_owner = NULL, lease_until = NULL
WHERE lease_owner = ? AND state = 'running'
"""

RELEASE_COMPLETIONS = """
UPDATE completions SET attempts = greatest(attempts - 1, 0), lease_owner = NULL, lease_until = NULL
WHERE lease_owner = ? AND phase = 'resolving'
"""

RENEW_DISPATCHES = """
UPDATE dispatches SET lease_until = ? WHERE lease_owner = ? AND state = 'running'
"""

RENEW_COMPLETIONS = """
UPDATE completions SET lease_until = ? WHERE lease_owner = ? AND phase = 'resolving'
"""

_JOB_COLUMNS = """source, job_id, state, provider_status, metadata, created_at, updated_at,
    last_news_at, terminal_at, progress_done, progress_total, expected_pages, error"""

DUE_POLLS = f"""
SELECT {_JOB_COLUMNS}, poll_attempts FROM jobs
WHERE source = ? AND terminal_at IS NULL AND next_poll_at <= ?
ORDER BY next_poll_at LIMIT ?
"""  # noqa: S608

NEXT_POLL = "SELECT min(next_poll_at) FROM jobs WHERE terminal_at IS NULL"

SCHEDULE_POLL = """
UPDATE jobs SET next_poll_at = ?, poll_attempts = ? WHERE source = ? AND job_id = ?
    AND terminal_at IS NULL
"""

ACQUIRE_LEASE = """
INSERT INTO leases (name, owner, until) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until
WHERE leases.owner = excluded.owner OR leases.until < ?
RETURNING owner
"""

START_RESULT_FETCH = """
INSERT INTO result_fetches (completion_id, started_at) VALUES (?, ?)
ON CONFLICT (completion_id) DO NOTHING RETURNING completion_id
"""

SELECT_DISPATCHES_FOR = f"""
SELECT {_DISPATCH_COLUMNS} FROM dispatches
WHERE completion_id = (SELECT id FROM completions WHERE job = {JOB_KEY})
ORDER BY handler
"""  # noqa: S608


def replay_query(
    source: str | None,
    job_id: str | None,
    handler: str | None,
    since: float | None,
    include_succeeded: bool,
) -> tuple[str, list[Any]]:
    """An UPDATE that re-queues the dispatches the filters select (dead ones by default)."""
    states = "('dead', 'succeeded')" if include_succeeded else "('dead')"
    where = [f"d.state IN {states}"]
    params: list[Any] = [now(), now()]
    if source is not None and job_id is not None:
        where.append(f"c.job = {JOB_KEY}")
        params += [source, job_id]
        source = job_id = None
    for clause, value in (("c.source = ?", source), ("c.job_id = ?", job_id),
                          ("d.handler = ?", handler), ("d.updated_at >= ?", since)):  # fmt: skip
        if value is not None:
            where.append(clause)
            params.append(value)
    query = f"""
    UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?, updated_at = ?,
        last_error = NULL, error_code = NULL, lease_owner = NULL, lease_until = NULL,
        finished_at = NULL
    WHERE id IN (SELECT d.id FROM dispatches d JOIN completions c ON c.id = d.completion_id
                 WHERE {" AND ".join(where)})
    """  # noqa: S608
    return query, params


HEARTBEAT = """
INSERT INTO replicas (owner, started_at, heartbeat_at) VALUES (?, ?, ?)
ON CONFLICT (owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
"""

STALE_REPLICAS = "DELETE FROM replicas WHERE heartbeat_at < ? RETURNING owner"

# Taking back a dead worker's claims keeps their attempt counts: the dead process may well
# have called the handler, and a handler that kills its process must still run out of tries.
TAKE_BACK_DISPATCHES = """
UPDATE dispatches SET state = 'pending', lease_owner = NULL, lease_until = NULL
WHERE state = 'running' AND lease_owner = ?
"""

TAKE_BACK_COMPLETIONS = """
UPDATE completions SET lease_owner = NULL, lease_until = NULL
WHERE phase = 'resolving' AND lease_owner = ?
"""

TAKE_BACK_LEASES = "DELETE FROM leases WHERE owner = ?"


def in_sources(sources: Sequence[str] | None, column: str = "j.source") -> tuple[str, list[Any]]:
    """`` AND <column> IN (...)`` and its values, to put where a statement says ``{only}``:
    only the rows of ``sources`` (a token limited to them); nothing when ``sources`` is None."""
    if sources is None:
        return "", []
    if not sources:
        return " AND 1 = 0", []
    return f" AND {column} IN ({','.join('?' * len(sources))})", list(sources)


def scoped(query: str, sources: Sequence[str] | None, column: str = "j.source") -> str:
    """``query`` with each ``{only}`` replaced by ``in_sources``' condition."""
    return query.replace("{only}", in_sources(sources, column)[0])
