"""The SQLite store's write operations, as plain functions of a ``sqlite3`` connection.

Each is ``op(conn, *args)``, defined at module level so that it travels to the writer process
(``receiver.store.sqlite.writer``) by name: this module and what it imports (and the engine's
programs it is sent, ``receiver.store.programs``) are all that process loads. Arguments and
results are picklable; an operation that only changes rows returns None or a count, never a
cursor. Three kinds: a webhook's ingest (SQLite's own algorithm, its hottest write), one
shared statement (``changed``), and a program of the engine's, driven step by step (``run``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from receiver.models import IngestResult, State
from receiver.store import audit as audit_sql
from receiver.store import codec, queries, sql
from receiver.store.sqlite import sql as sqlite_sql
from receiver.store.sqlite.sql import DIALECT

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Generator, Sequence

    from receiver.models import Event
    from receiver.store.audit import AuditEntry
    from receiver.store.connector import Step

T = TypeVar("T")


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
    job: int = known[0] if known is not None else _insert(db, sqlite_sql.INSERT_NEW_JOB, args)
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
        ((state, took),) = db.execute(sqlite_sql.UPSERT_JOB, args).fetchall()
    completed = False
    if event.state.terminal and state == event.state:
        if new_job:
            extra = codec.completion_phase(event, resolve)
            created = db.execute(
                sqlite_sql.INSERT_NEW_COMPLETION,
                (*args[:7], *extra, event.error_code, event.traceparent, job),
            )
        else:
            created = db.execute(
                sqlite_sql.INSERT_COMPLETION, codec.completion_params(event, now, resolve, job)
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


def changed(db: sqlite3.Connection, query: str, params: Sequence[Any]) -> int:
    """One statement, already in SQLite's words (``DIALECT.sql``); how many rows it changed."""
    return db.execute(query, bindable(params)).rowcount


def run(db: sqlite3.Connection, program: Callable[..., Generator[Step, Any, T]], *args: Any) -> T:
    """``program(*args)``, its steps run on ``db`` in order, each answer sent back to it."""
    steps = program(*args)
    answer: Any = None
    try:
        while True:
            answer = _step(db, steps.send(answer))
    except StopIteration as done:
        result: T = done.value
        return result


def _step(db: sqlite3.Connection, step: Step) -> Any:
    query, params, want = DIALECT.sql(step.query), step.params, step.want
    if want == "many":
        db.executemany(query, params)
        return None
    cursor = db.execute(query, bindable(params))
    if want == "count":
        return cursor.rowcount
    if want == "rows":
        return cursor.fetchall()
    row = cursor.fetchone() if want != "none" else None
    if want == "value":
        return None if row is None else row[0]
    return row


def bindable(params: Sequence[Any]) -> Sequence[Any]:
    """``params`` as ``sqlite3`` binds them: a list (the shared SQL's list parameters, which
    SQLite reads with ``json_each``) as JSON text."""
    if any(isinstance(p, list) for p in params):
        return [json.dumps(p) if isinstance(p, list) else p for p in params]
    return params
