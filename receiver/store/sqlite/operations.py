"""The SQLite store's write operations, as plain functions of a ``sqlite3`` connection.

Each is ``op(conn, *args)``, defined at module level so that it travels to the writer process
(``receiver.store.sqlite.writer``) by name: this module and what it imports are all that process
loads. Arguments and results are picklable; an operation that only changes rows returns None
or a count, never a cursor.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from receiver.models import IngestResult, State
from receiver.store import audit as audit_sql
from receiver.store import circuits, codec, fields, history, queries, reprocesses, sql

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Collection, Sequence

    from receiver.models import Event
    from receiver.store.audit import AuditEntry
    from receiver.store.rows import CompletionRow, DispatchRow


def ingest(
    db: sqlite3.Connection,
    event: Event,
    handlers: Sequence[str],
    resolve: bool,
    now: float,
    audit: AuditEntry | None = None,
) -> IngestResult:
    """``_ingest``, and the admin call's audit row (``audit``, if any) in its transaction."""
    result = _ingest(db, event, handlers, resolve, now)
    _audited(db, audit, int(result.status == "accepted"))
    return result


def _audited(db: sqlite3.Connection, audit: AuditEntry | None, jobs: int) -> None:
    """The row of the admin call whose effect this transaction is, finished with it."""
    if audit is not None:
        db.execute(
            audit_sql.INSERT, audit_sql.insert_params(audit_sql.done(audit, jobs))
        ).fetchall()


def _ingest(
    db: sqlite3.Connection, event: Event, handlers: Sequence[str], resolve: bool, now: float
) -> IngestResult:
    """Record ``event``: a delivery (the dedupe key), its job, and a completion with its
    dispatches when the event finishes the job.

    The job's id comes first, since the delivery is keyed by it: a known job's is read, a new
    job's row is inserted to get one (and deleted again in the rare case that its delivery
    turns out to be a duplicate: a provider reusing a message id for another job)."""
    args = codec.job_args(event, now)
    known = db.execute(sql.SELECT_JOB_ID, (event.source, event.job_id)).fetchone()
    new_job = known is None
    job: int = known[0] if known is not None else _insert(db, sql.INSERT_NEW_JOB, args)
    if (
        event.message_id is not None
        and not db.execute(sql.INSERT_DELIVERY_ROW, codec.delivery_params(event, now, job)).rowcount
    ):
        if new_job:
            db.execute(queries.DELETE_JOB, (job,))
            return IngestResult("duplicate", event.job_id, event.state)
        cursor = db.execute(sql.REQUEUE_DEAD_FOR_JOB, (now, now, job))
        return IngestResult("duplicate", event.job_id, State(known[1]), requeued=cursor.rowcount)
    took: float | None = 0.0 if event.state.terminal else None
    if new_job:
        state: str = event.state.value  # a new job holds what its first news says
    else:
        ((state, took),) = db.execute(sql.UPSERT_JOB, args).fetchall()
    completed = False
    if event.state.terminal and state == event.state:
        if new_job:
            extra = codec.completion_phase(event, resolve)
            created = db.execute(
                sql.INSERT_NEW_COMPLETION,
                (*args[:7], *extra, event.error_code, event.traceparent, job),
            )
        else:
            created = db.execute(
                sql.INSERT_COMPLETION, codec.completion_params(event, now, resolve, job)
            )
        if created.rowcount:
            completed = True
            completion_id = created.lastrowid
            db.executemany(sql.INSERT_DISPATCH, [(completion_id, h, now, now) for h in handlers])
    return IngestResult("accepted", event.job_id, State(state), completed=completed,
                        took=took if completed else None)  # fmt: skip


def _insert(db: sqlite3.Connection, query: str, params: Sequence[Any]) -> int:
    rowid = db.execute(query, params).lastrowid
    assert rowid is not None  # an INSERT of one row, never ignored here
    return rowid


def execute(db: sqlite3.Connection, query: str, params: Sequence[Any]) -> None:
    """One statement whose rows, if any, nobody reads."""
    db.execute(query, params)


def changed(
    db: sqlite3.Connection, query: str, params: Sequence[Any], audit: AuditEntry | None = None
) -> int:
    """One statement; how many rows it changed (and the admin call's audit row, if any)."""
    count = db.execute(query, params).rowcount
    _audited(db, audit, count)
    return count


def inserted_id(db: sqlite3.Connection, query: str, params: Sequence[Any]) -> int:
    """One ``INSERT ... RETURNING id``; the id."""
    new_id: int = db.execute(query, params).fetchone()[0]
    return new_id


def claim_completions(
    db: sqlite3.Connection, owner: str, limit: int, until: float, now: float
) -> list[CompletionRow]:
    rows = db.execute(sql.CLAIM_COMPLETIONS, (owner, until, now, now, limit)).fetchall()
    return [codec.completion_row(r) for r in rows]


def claim_dispatches(
    db: sqlite3.Connection, owner: str, limit: int, until: float, now: float, busy: tuple[str, ...]
) -> list[tuple[DispatchRow, CompletionRow]]:
    claimed = _probes(db, owner, until, now, busy)
    left = max(limit - len(claimed), 0)
    params = (owner, until, now, now, now, json.dumps(busy), left)
    rows = db.execute(sql.CLAIM_DISPATCHES, params).fetchall()
    claimed += [codec.dispatch_row(r) for r in rows]
    if not claimed:
        return []
    ids = sorted({d.completion_id for d in claimed})
    marks = ",".join("?" * len(ids))
    comps = db.execute(f"{sql.SELECT_COMPLETION} WHERE id IN ({marks})", ids).fetchall()
    by_id = {c.id: c for c in map(codec.completion_row, comps)}
    return [(d, by_id[d.completion_id]) for d in claimed]


def renew(db: sqlite3.Connection, owner: str, lease_until: float) -> None:
    db.execute(sql.RENEW_DISPATCHES, (lease_until, owner))
    db.execute(sql.RENEW_COMPLETIONS, (lease_until, owner))


def release(db: sqlite3.Connection, owner: str) -> int:
    a = db.execute(sql.RELEASE_DISPATCHES, (owner,))
    b = db.execute(sql.RELEASE_COMPLETIONS, (owner,))
    return a.rowcount + b.rowcount


def acquire_lease(db: sqlite3.Connection, name: str, owner: str, until: float, now: float) -> bool:
    return bool(db.execute(sql.ACQUIRE_LEASE, (name, owner, until, now)).fetchall())


def start_result_fetch(db: sqlite3.Connection, completion_id: int, now: float) -> bool:
    return bool(db.execute(sql.START_RESULT_FETCH, (completion_id, now)).fetchall())


def heartbeat(db: sqlite3.Connection, owner: str, now: float) -> None:
    db.execute(sql.HEARTBEAT, (owner, now, now))


def take_back_stale(db: sqlite3.Connection, stale_before: float) -> int:
    """Forget replicas whose heartbeat is older than ``stale_before`` and free their claims."""
    owners = [row[0] for row in db.execute(sql.STALE_REPLICAS, (stale_before,)).fetchall()]
    freed = 0
    for owner in owners:
        freed += db.execute(sql.TAKE_BACK_DISPATCHES, (owner,)).rowcount
        freed += db.execute(sql.TAKE_BACK_COMPLETIONS, (owner,)).rowcount
        db.execute(sql.TAKE_BACK_LEASES, (owner,))
    return freed


def finish_dispatch(db: sqlite3.Connection, finish: Sequence[Any]) -> None:
    """The attempt's row (``history.record_params``), then the dispatch's update."""
    db.execute(history.RECORD_ATTEMPT, history.record_params(finish))
    db.execute(sql.FINISH_DISPATCH, finish)


def resolve_completion(
    db: sqlite3.Connection,
    params: Sequence[Any],
    completion_id: int,
    rows: Sequence[tuple[Any, ...]],
) -> bool:
    """The resolution, then (if the lease was still ours) the fields it found; False when the
    lease was lost and nothing was stored."""
    if not db.execute(sql.RESOLVE_COMPLETION, params).rowcount:
        return False
    if rows:
        db.execute(fields.DELETE_FIELDS, (completion_id,))
        db.executemany(fields.INSERT_FIELD, rows)
    return True


def circuit_failed(db: sqlite3.Connection, params: Sequence[Any]) -> str:
    state: str = db.execute(circuits.FAILED, params).fetchone()[0]
    return state


def circuit_probe_now(db: sqlite3.Connection, handler: str, now: float) -> None:
    db.execute(circuits.PROBE_DUE, (now, handler, now, handler))
    db.execute(circuits.PROBE_NOW, (now, now, handler, now))


def _probes(
    db: sqlite3.Connection, owner: str, until: float, now: float, busy: Collection[str] = ()
) -> list[DispatchRow]:
    """Take the probes that are due: one dispatch per probing handler; a ``busy`` handler's
    probe waits, its circuit open, until the handler has a free slot."""
    claimed: list[DispatchRow] = []
    for (handler,) in db.execute(circuits.TAKE_PROBES, (until, now, now)).fetchall():
        row = None
        if handler not in busy:
            params = (owner, until, now, handler, now, now)
            row = db.execute(circuits.CLAIM_PROBE, params).fetchone()
        if row is None:
            db.execute(circuits.NO_PROBE, (handler, now, handler))
        else:
            claimed.append(codec.dispatch_row(row))
    return claimed


def claim_reprocess(db: sqlite3.Connection, params: Sequence[Any]) -> bool:
    return db.execute(reprocesses.CLAIM, params).fetchone() is not None


def purge(db: sqlite3.Connection, before: float, limit: int) -> tuple[int, list[str]]:
    """Delete up to ``limit`` delivered jobs with everything they own; return result paths."""
    rows = db.execute(queries.PURGEABLE, (before, before, limit)).fetchall()
    keys = [(job,) for job, _, _ in rows]
    completions = [(cid,) for _, cid, _ in rows if cid is not None]
    db.executemany(queries.DELETE_DELIVERIES, keys)
    db.executemany(queries.DELETE_DISPATCHES, completions)
    db.executemany(queries.DELETE_COMPLETION, completions)
    db.executemany(queries.DELETE_JOB, keys)
    return len(rows), [path for _, _, path in rows if path]
