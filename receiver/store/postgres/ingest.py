"""PostgreSQL's ingest of webhooks: a batch in one call of ``jobhook_ingest_batch`` (migration
14, ``functions``: statements over all of a batch's events, or those of migration 12 one event
at a time), or one event in its own transaction, statement by statement.

The batch is what ``receiver.store.postgres.group_commit`` commits; the one-event path is kept
for a batch that PostgreSQL refused, to find the bad event among its neighbours (and as the
reference the function follows: the same statements, in the same order, with the same results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from receiver.models import IngestResult, State
from receiver.store import audit as audit_sql
from receiver.store import codec, sql
from receiver.store.connector import numbered
from receiver.store.postgres import sql as pg_sql
from receiver.store.postgres.pool import affected, text_without_nul

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Sequence

    from receiver.models import Event
    from receiver.store.audit import AuditEntry
    from receiver.store.postgres.pool import Conn

_AUDIT_INSERT = numbered(audit_sql.INSERT)

INGEST_BATCH = """
SELECT o_status, o_state, o_completed, o_took, o_requeued FROM jobhook_ingest_batch(
    $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::text[],
    $8::double precision[], $9::double precision[], $10::bigint[], $11::bigint[],
    $12::bigint[], $13::double precision[], $14::text[], $15::text[], $16::text[],
    $17::text[], $18::integer[], $19::text[])
"""

# Which of job_args' columns are text (the rest: metadata, jsonb, and numbers). asyncpg encodes
# a text[] without the connection's text codec (``pool``), so its NUL replacement happens here;
# jsonb[] elements do go through the jsonb codec.
_JOB_TEXT = (True, True, True, True, False, True, False, False, False, False, False, False, True)


@dataclass(slots=True)
class Ingest:
    """One event waiting for its batch: what ``Store.ingest`` was given, when, and its answer."""

    event: Event
    handlers: Sequence[str]
    resolve: bool
    at: float
    future: asyncio.Future[IngestResult]

    @property
    def key(self) -> tuple[str, str]:
        return self.event.source, self.event.job_id


def _text(value: Any) -> Any:
    return text_without_nul(value) if isinstance(value, str) else value


def batch_args(batch: Sequence[Ingest]) -> list[list[Any]]:
    """``INGEST_BATCH``'s 19 arrays: job_args' 13 columns put in the function's order, the
    message id, completion_args' phase, result reference and traceparent, handler counts and
    the handlers one after the other."""
    jobs: list[list[Any]] = [[] for _ in range(13)]
    message_ids: list[str | None] = []
    completion: list[list[Any]] = [[], [], []]
    counts: list[int] = []
    handlers: list[str] = []
    for item in batch:
        event, at = item.event, item.at
        for column, value, text in zip(jobs, codec.job_args(event, at), _JOB_TEXT, strict=True):
            column.append(_text(value) if text else value)
        message_ids.append(_text(event.message_id))
        _, _, phase, ref, parent = pg_sql.completion_args(event, at, item.resolve, 0)
        for column, value in zip(completion, (phase, ref, parent), strict=True):
            column.append(_text(value))
        counts.append(len(item.handlers))
        handlers.extend(map(text_without_nul, item.handlers))
    source, job_id, state, status, metadata, error, at_, terminal, *rest = jobs
    progress_done, progress_total, pages, poll_at, error_code = rest
    return [
        source, message_ids, job_id, state, status, metadata, error, at_, terminal,
        progress_done, progress_total, pages, poll_at, error_code, *completion, counts, handlers,
    ]  # fmt: skip


def batch_result(item: Ingest, row: Sequence[Any]) -> IngestResult:
    """The answer for ``item`` from its row of ``INGEST_BATCH``."""
    status, state, completed, took, requeued = row
    return IngestResult(status, item.event.job_id, State(state), completed=completed,
                        requeued=requeued, took=took)  # fmt: skip


async def ingest_batch(conn: Conn, batch: Sequence[Ingest]) -> list[IngestResult]:
    """Store ``batch`` in its order: one statement, one round trip (a transaction of its own
    when ``conn`` is in none)."""
    rows = await conn.fetch(INGEST_BATCH, *batch_args(batch))
    if len(rows) != len(batch):
        raise AssertionError(f"jobhook_ingest_batch answered {len(rows)} of {len(batch)}")
    return [batch_result(item, row) for item, row in zip(batch, rows, strict=True)]


async def audited(conn: Conn, audit: AuditEntry | None, jobs: int) -> None:
    """The row of the admin call whose effect the transaction ``conn`` is in is, finished."""
    if audit is not None:
        await conn.execute(_AUDIT_INSERT, *audit_sql.insert_params(audit_sql.done(audit, jobs)))


async def ingest_one(conn: Conn, item: Ingest, audit: AuditEntry | None = None) -> IngestResult:
    """Store one event statement by statement, in the transaction ``conn`` is in (with the
    admin call's ``audit`` row, if any)."""
    result = await _ingest_one(conn, item)
    await audited(conn, audit, int(result.status == "accepted"))
    return result


async def _ingest_one(conn: Conn, item: Ingest) -> IngestResult:
    event, now = item.event, item.at
    known = await conn.fetchrow(pg_sql.SELECT_JOB_ID, event.source, event.job_id)
    job: int = known[0] if known is not None else await conn.fetchval(pg_sql.NEXT_JOB_ID)
    if event.message_id is not None:
        delivery = codec.delivery_params(event, now, job)
        seen = await conn.fetchval(pg_sql.INSERT_DELIVERY, *delivery) is None
        if seen:
            requeued = await conn.execute(numbered(sql.REQUEUE_DEAD_FOR_JOB), now, now, job)
            state = await conn.fetchval(pg_sql.JOB_STATE_BY_ID, job) or event.state.value
            return IngestResult(
                "duplicate", event.job_id, State(state), requeued=affected(requeued)
            )
    stored, state, took = await conn.fetchrow(pg_sql.UPSERT_JOB, *codec.job_args(event, now), job)
    if stored != job and event.message_id is not None:
        # Another transaction saw the job first, after our read: its id, not ours.
        await conn.execute(pg_sql.MOVE_DELIVERY, stored, event.source, event.message_id)
    completed = False
    if event.state.terminal and state == event.state:
        await conn.execute(pg_sql.LOCK_COMPLETIONS_SHARED)
        args = pg_sql.completion_args(event, now, item.resolve, stored)
        completion_id = await conn.fetchval(pg_sql.INSERT_COMPLETION, *args)
        if completion_id is not None:
            completed = True
            rows = [(completion_id, handler, now, now) for handler in item.handlers]
            await conn.executemany(numbered(sql.INSERT_DISPATCH), rows)
    return IngestResult("accepted", event.job_id, State(state), completed=completed,
                        took=took if completed else None)  # fmt: skip
