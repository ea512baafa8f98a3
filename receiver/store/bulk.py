"""Replay by filter, in chunks: the dispatches of the jobs a JobFilter selects, a few hundred
rows per transaction in dispatch id order, so no statement holds a lock long enough to stall
intake and a second run finds nothing left to requeue (only rows still in the selected state
are changed). Both backends run these statements (PostgreSQL after ``numbered``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from receiver.store import queries

if TYPE_CHECKING:
    from receiver.store.rows import JobFilter

REPLAYABLE = ("dead", "succeeded")


@dataclass(frozen=True, slots=True)
class ReplayFilter:
    """Which dispatches a bulk replay requeues: those in ``dispatch_state`` (dead or succeeded)
    of the jobs ``jobs`` selects, of one ``handler`` if named, last touched at or after
    ``since`` if given."""

    jobs: JobFilter
    dispatch_state: str = "dead"
    handler: str | None = None
    since: float | None = None


def _selection(f: ReplayFilter, columns: str) -> tuple[str, list[Any]]:
    clauses, params = queries.job_clauses(f.jobs)
    clauses.insert(0, "d.state = ?")
    params.insert(0, f.dispatch_state)
    for clause, value in (("d.handler = ?", f.handler), ("d.updated_at >= ?", f.since)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    query = f"""SELECT {columns} FROM dispatches d
    JOIN completions c ON c.id = d.completion_id
    JOIN jobs j ON j.id = c.job
    WHERE {" AND ".join(clauses)}"""  # noqa: S608
    return query, params


def count_query(f: ReplayFilter) -> tuple[str, list[Any]]:
    return _selection(f, "count(*)")


def chunk_query(f: ReplayFilter, after_id: int, limit: int) -> tuple[str, list[Any]]:
    query, params = _selection(f, "d.id")
    return f"{query} AND d.id > ? ORDER BY d.id LIMIT ?", [*params, after_id, limit]


def requeue_query(count: int) -> str:
    marks = ",".join("?" * count)
    return f"""UPDATE dispatches SET state = 'pending', attempts = 0, next_attempt_at = ?,
    updated_at = ?, last_error = NULL, error_code = NULL, lease_owner = NULL, lease_until = NULL,
    finished_at = NULL
    WHERE state = ? AND id IN ({marks})"""  # noqa: S608
