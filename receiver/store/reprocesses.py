"""Reprocess links: which new job a finished job was submitted again as, claimed before it is.

One row per old job (``UNIQUE (source, job_id)``): a claim is an upsert that only wins while no
submission is under way or done, so two callers (or replicas) never submit the same job twice.
States: ``submitting`` (claimed, the POST is under way), ``submitted`` (``new_job_id`` known),
``failed`` (the provider refused or could not be reached: claimable again), ``unknown`` (the
POST timed out: the job may exist, so only ``force`` claims it again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store.rows import ReprocessRow

if TYPE_CHECKING:
    from collections.abc import Sequence

COLUMNS = "source, job_id, state, new_job_id, attempts, error, created_at, updated_at"
CLAIM = """INSERT INTO reprocesses (source, job_id, state, attempts, owner, created_at, updated_at)
VALUES (?, ?, 'submitting', 1, ?, ?, ?)
ON CONFLICT (source, job_id) DO UPDATE SET state = 'submitting',
    attempts = reprocesses.attempts + 1, owner = excluded.owner, error = NULL,
    updated_at = excluded.updated_at
WHERE reprocesses.state = 'failed'
    OR (reprocesses.state = 'submitting' AND reprocesses.updated_at < ?)
    OR (CAST(? AS BOOLEAN) AND reprocesses.state IN ('submitted', 'unknown'))
RETURNING attempts"""
FINISH = """UPDATE reprocesses SET state = ?, new_job_id = COALESCE(?, new_job_id), error = ?,
    owner = NULL, updated_at = ?
WHERE source = ? AND job_id = ? AND owner = ? AND state = 'submitting'"""
OF_JOB = f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND job_id = ?"  # noqa: S608
FROM_JOB = f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND new_job_id = ?"  # noqa: S608


def of_jobs(count: int) -> str:
    marks = ",".join("?" * count)
    return f"SELECT {COLUMNS} FROM reprocesses WHERE source = ? AND job_id IN ({marks})"  # noqa: S608


def row(values: Sequence[Any]) -> ReprocessRow:
    return ReprocessRow(*values)


def state_of(new_job_id: str | None, unknown: bool) -> str:
    return "submitted" if new_job_id is not None else "unknown" if unknown else "failed"


def claim_params(
    source: str, job_id: str, owner: str, now: float, stale_before: float, force: bool
) -> tuple[Any, ...]:
    return (source, job_id, owner, now, now, stale_before, force)
