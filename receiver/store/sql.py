"""SQL statements of the SQLite store, and the row converters every backend shares."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from receiver import jsontext
from receiver.store.rows import CompletionRow, DispatchRow, JobRow, Resolution

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event


def now() -> float:
    return time.time()


def _rank(column: str) -> str:
    return f"(CASE {column} WHEN 'queued' THEN 0 WHEN 'running' THEN 1 ELSE 2 END)"


_FORWARD = f"jobs.terminal_at IS NULL AND {_rank('excluded.state')} >= {_rank('jobs.state')}"

# SQLite learns what an INSERT did from its change count (cursor.rowcount, lastrowid): there a
# RETURNING clause costs a statement ~5 us more, and SQLite's part of a webhook was ~70 us with
# three of them (a microbenchmark of the statements). PostgreSQL keeps RETURNING (pg_sql).
INSERT_DELIVERY_ROW = """
INSERT INTO deliveries (source, message_id, job_id, state, provider_status, received_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

_INSERT_JOB_ROW = """
INSERT INTO jobs (source, job_id, state, provider_status, metadata, error, created_at, updated_at,
                  last_news_at, terminal_at, progress_done, progress_total, expected_pages,
                  next_poll_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7, ?8, ?9, ?10, ?11, ?12)
"""

INSERT_NEW_JOB = _INSERT_JOB_ROW + "ON CONFLICT DO NOTHING\n"
"""A job's first news (``job_args``): the row as UPSERT_JOB inserts it; nothing for a known job."""

UPSERT_JOB = (
    _INSERT_JOB_ROW
    + f"""ON CONFLICT (source, job_id) DO UPDATE SET
    state = CASE WHEN {_FORWARD} THEN excluded.state ELSE jobs.state END,
    provider_status = CASE WHEN {_FORWARD} THEN excluded.provider_status
                           ELSE jobs.provider_status END,
    error = CASE WHEN jobs.terminal_at IS NULL THEN coalesce(excluded.error, jobs.error)
                 ELSE jobs.error END,
    terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
    metadata = json_patch(jobs.metadata, excluded.metadata),
    updated_at = excluded.updated_at,
    last_news_at = excluded.last_news_at,
    progress_done = coalesce(excluded.progress_done, jobs.progress_done),
    progress_total = coalesce(excluded.progress_total, jobs.progress_total),
    expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
    next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
    poll_attempts = CASE WHEN excluded.next_poll_at IS NULL THEN jobs.poll_attempts ELSE 0 END
RETURNING state
"""
)

INSERT_COMPLETION = """
INSERT INTO completions (source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref)
SELECT source, job_id, state, provider_status, metadata, error, :now, :now, :phase, :result_ref
FROM jobs WHERE source = :source AND job_id = :job_id
ON CONFLICT (source, job_id) DO NOTHING
"""
"""One row, or none when the job already has its completion: its id is the cursor's lastrowid."""

INSERT_NEW_COMPLETION = """
INSERT INTO completions (source, job_id, state, provider_status, metadata, error, created_at,
                         next_attempt_at, phase, result_ref)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9) ON CONFLICT (source, job_id) DO NOTHING
"""
"""INSERT_COMPLETION for a job created in the same transaction: its row is ``job_args``' first
seven values, so they are inserted as they are instead of read back (~3 us a webhook)."""

INSERT_DISPATCH = """
INSERT INTO dispatches (completion_id, handler, next_attempt_at, updated_at)
VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

REQUEUE_DEAD_FOR_JOB = """
UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?, updated_at = ?,
    lease_owner = NULL, lease_until = NULL
WHERE state = 'dead'
  AND completion_id = (SELECT id FROM completions WHERE source = ? AND job_id = ?)
"""

_COMPLETION_COLUMNS = """id, source, job_id, state, provider_status, metadata, error, created_at,
    phase, result_path, result_sha256, result_bytes, attempts, result_ref"""
SELECT_COMPLETION = f"SELECT {_COMPLETION_COLUMNS} FROM completions"  # noqa: S608

SELECT_JOB = """
SELECT source, job_id, state, provider_status, metadata, created_at, updated_at, last_news_at,
       terminal_at, progress_done, progress_total, expected_pages, error, poll_attempts
FROM jobs WHERE source = ? AND job_id = ?
"""

CLAIM_COMPLETIONS = f"""
UPDATE completions SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM completions
    WHERE phase = 'resolving' AND next_attempt_at <= ?
      AND (lease_until IS NULL OR lease_until < ?)
    ORDER BY next_attempt_at LIMIT ?)
RETURNING {_COMPLETION_COLUMNS}
"""  # noqa: S608

RESOLVE_COMPLETION = """
UPDATE completions SET phase = 'ready', result_path = ?, result_sha256 = ?, result_bytes = ?,
    error = coalesce(?, error), state = coalesce(?, state),
    provider_status = coalesce(?, provider_status), resolved_at = ?, confidence = ?,
    lease_owner = NULL, lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

RETRY_COMPLETION = """
UPDATE completions SET last_error = ?, next_attempt_at = ?, lease_owner = NULL, lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

_DISPATCH_COLUMNS = """id, completion_id, handler, state, attempts, next_attempt_at, last_error,
    updated_at"""

CLAIM_DISPATCHES = f"""
UPDATE dispatches SET state = 'running', lease_owner = ?, lease_until = ?,
    attempts = attempts + 1, updated_at = ?
WHERE id IN (
    SELECT d.id FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready'
      AND ((d.state = 'pending' AND d.next_attempt_at <= ?)
           OR (d.state = 'running' AND d.lease_until < ?))
    ORDER BY d.next_attempt_at LIMIT ?)
RETURNING {_DISPATCH_COLUMNS}
"""  # noqa: S608

FINISH_DISPATCH = """
UPDATE dispatches SET state = ?, next_attempt_at = coalesce(?, next_attempt_at), last_error = ?,
    updated_at = ?, finished_at = ?, lease_owner = NULL, lease_until = NULL
WHERE id = ? AND lease_owner = ?
"""

RELEASE_DISPATCHES = """
UPDATE dispatches SET state = 'pending', attempts = max(attempts - 1, 0),
    lease_owner = NULL, lease_until = NULL
WHERE lease_owner = ? AND state = 'running'
"""

RELEASE_COMPLETIONS = """
UPDATE completions SET attempts = max(attempts - 1, 0), lease_owner = NULL, lease_until = NULL
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

NEXT_DUE = """
SELECT min(t) FROM (
    SELECT min(next_attempt_at) AS t FROM completions WHERE phase = 'resolving'
    UNION ALL
    SELECT min(coalesce(CASE WHEN d.state = 'running' THEN d.lease_until END, d.next_attempt_at))
    FROM dispatches d JOIN completions c ON c.id = d.completion_id
    WHERE c.phase = 'ready' AND d.state IN ('pending', 'running')
    UNION ALL
    SELECT min(lease_until) FROM completions WHERE phase = 'resolving' AND lease_until IS NOT NULL
)
"""

SELECT_DISPATCHES_FOR = f"""
SELECT {_DISPATCH_COLUMNS} FROM dispatches
WHERE completion_id = (SELECT id FROM completions WHERE source = ? AND job_id = ?)
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
    for clause, value in (("c.source = ?", source), ("c.job_id = ?", job_id),
                          ("d.handler = ?", handler), ("d.updated_at >= ?", since)):  # fmt: skip
        if value is not None:
            where.append(clause)
            params.append(value)
    query = f"""
    UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?, updated_at = ?,
        last_error = NULL, lease_owner = NULL, lease_until = NULL, finished_at = NULL
    WHERE id IN (SELECT d.id FROM dispatches d JOIN completions c ON c.id = d.completion_id
                 WHERE {" AND ".join(where)})
    """  # noqa: S608
    return query, params


def delivery_params(event: Event, at: float) -> tuple[Any, ...]:
    return (
        event.source,
        event.message_id,
        event.job_id,
        event.state.value,
        event.provider_status,
        at,
    )


def job_args(event: Event, at: float) -> tuple[Any, ...]:
    """The job row's arguments in UPSERT_JOB's order (both stores): source, job_id, state,
    provider_status, metadata, error, now, terminal_at, progress_done, progress_total,
    expected_pages, poll_at."""
    progress = event.progress
    return (
        event.source, event.job_id, event.state.value, event.provider_status,
        jsontext.dumps(event.metadata), event.error, at, at if event.state.terminal else None,
        progress.done if progress else None, progress.total if progress else None,
        event.expected_pages, event.poll_at,
    )  # fmt: skip


def completion_phase(event: Event, resolve: bool) -> tuple[str, str | None]:
    """A new completion's phase and result reference (JSON text, or None)."""
    ref = event.result
    result_ref = None
    if ref is not None:
        result_ref = json.dumps({"inline": ref.inline, "url": ref.url, "sha256": ref.sha256})
    return ("resolving" if resolve else "ready"), result_ref


def completion_params(event: Event, at: float, resolve: bool) -> dict[str, Any]:
    phase, result_ref = completion_phase(event, resolve)
    return {
        "source": event.source,
        "job_id": event.job_id,
        "now": at,
        "phase": phase,
        "result_ref": result_ref,
    }


def resolution_params(completion_id: int, owner: str, r: Resolution) -> tuple[Any, ...]:
    state = r.state.value if r.state else None
    return (
        r.result_path,
        r.result_sha256,
        r.result_bytes,
        r.error,
        state,
        r.provider_status,
        now(),
        r.confidence,
        completion_id,
        owner,
    )


def finish_params(
    dispatch_id: int, owner: str, error: str | None, next_attempt_at: float | None
) -> tuple[Any, ...]:
    at = now()
    if error is None:
        state, finished = "succeeded", at
    elif next_attempt_at is None:
        state, finished = "dead", at
    else:
        state, finished = "pending", None
    return (state, next_attempt_at, error, at, finished, dispatch_id, owner)


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    loaded = json.loads(value) if value else {}
    return loaded if isinstance(loaded, dict) else {}


def job_row(r: Sequence[Any]) -> JobRow:
    attempts = r[13] if len(r) > 13 else 0
    return JobRow(
        r[0], r[1], r[2], r[3], _json(r[4]), r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
        attempts,
    )  # fmt: skip


def completion_row(r: Sequence[Any]) -> CompletionRow:
    return CompletionRow(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        _json(r[5]),
        r[6],
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
        r[12],
        r[13],
    )


def dispatch_row(r: Sequence[Any]) -> DispatchRow:
    return DispatchRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])
