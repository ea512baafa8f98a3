"""The store's writes of more than one statement, once for every backend.

Each is a generator function (``receiver.store.connector``): it yields the ``Step``s of one
transaction, is sent each step's answer, and returns the write's result. SQLite's writer runs
them on a ``sqlite3`` connection, in the loop's thread or in the writer process (they travel
there by name, with picklable arguments: this module and what it imports are what that process
loads for them); PostgreSQL runs them on a pooled connection inside a transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.store import audit as audit_sql
from receiver.store import circuits, codec, fields, history, queries, reprocesses, sql
from receiver.store.connector import Step

if TYPE_CHECKING:
    from collections.abc import Collection, Generator, Sequence

    from receiver.store.audit import AuditEntry
    from receiver.store.rows import CompletionRow, DispatchRow


def claim_completions(
    owner: str, limit: int, until: float, now: float
) -> Generator[Step, Any, list[CompletionRow]]:
    """Lease up to ``limit`` due completions to ``owner``."""
    rows = yield Step(sql.CLAIM_COMPLETIONS, (owner, until, now, now, limit), "rows")
    return [codec.completion_row(r) for r in rows]


def claim_dispatches(
    owner: str, limit: int, until: float, now: float, busy: list[str]
) -> Generator[Step, Any, list[tuple[DispatchRow, CompletionRow]]]:
    """The due probes first, then up to ``limit`` due dispatches of closed circuits, each with
    its completion; none of a ``busy`` handler."""
    claimed = yield from _probes(owner, until, now, busy)
    left = max(limit - len(claimed), 0)
    params = (owner, until, now, now, now, busy, left)
    rows = yield Step(sql.CLAIM_DISPATCHES, params, "rows")
    claimed += [codec.dispatch_row(r) for r in rows]
    if not claimed:
        return []
    ids = sorted({d.completion_id for d in claimed})
    comps = yield Step(sql.completions_by_id(len(ids)), ids, "rows")
    by_id = {c.id: c for c in map(codec.completion_row, comps)}
    return [(d, by_id[d.completion_id]) for d in claimed]


def _probes(
    owner: str, until: float, now: float, busy: Collection[str]
) -> Generator[Step, Any, list[DispatchRow]]:
    """Take the probes that are due: one dispatch per probing handler; a ``busy`` handler's
    probe waits, its circuit open, until the handler has a free slot."""
    claimed: list[DispatchRow] = []
    for (handler,) in (yield Step(circuits.TAKE_PROBES, (until, now, now), "rows")):
        row = None
        if handler not in busy:
            params = (owner, until, now, handler, now, now)
            row = yield Step(circuits.CLAIM_PROBE, params, "row")
        if row is None:
            yield Step(circuits.NO_PROBE, (handler, now, handler))
        else:
            claimed.append(codec.dispatch_row(row))
    return claimed


def finish_dispatch(finish: Sequence[Any]) -> Generator[Step, Any, None]:
    """The attempt's row (``history.record_params``), then the dispatch's update."""
    yield Step(history.RECORD_ATTEMPT, history.record_params(finish))
    yield Step(sql.FINISH_DISPATCH, finish)


def renew(owner: str, lease_until: float) -> Generator[Step, Any, None]:
    yield Step(sql.RENEW_DISPATCHES, (lease_until, owner))
    yield Step(sql.RENEW_COMPLETIONS, (lease_until, owner))


def release(owner: str) -> Generator[Step, Any, int]:
    dispatches = yield Step(sql.RELEASE_DISPATCHES, (owner,), "count")
    completions = yield Step(sql.RELEASE_COMPLETIONS, (owner,), "count")
    return int(dispatches) + int(completions)


def take_back_stale(stale_before: float) -> Generator[Step, Any, int]:
    """Forget replicas whose heartbeat is older than ``stale_before`` and free their claims."""
    freed = 0
    for (owner,) in (yield Step(sql.STALE_REPLICAS, (stale_before,), "rows")):
        freed += yield Step(sql.TAKE_BACK_DISPATCHES, (owner,), "count")
        freed += yield Step(sql.TAKE_BACK_COMPLETIONS, (owner,), "count")
        yield Step(sql.TAKE_BACK_LEASES, (owner,))
    return freed


def acquire_lease(name: str, owner: str, until: float, now: float) -> Generator[Step, Any, bool]:
    held = yield Step(sql.ACQUIRE_LEASE, (name, owner, until, now), "row")
    return held is not None


def start_result_fetch(completion_id: int, now: float) -> Generator[Step, Any, bool]:
    started = yield Step(sql.START_RESULT_FETCH, (completion_id, now), "row")
    return started is not None


def resolve_completion(
    params: Sequence[Any], completion_id: int, rows: Sequence[tuple[Any, ...]]
) -> Generator[Step, Any, bool]:
    """The resolution, then (if the lease was still ours) the fields it found; False when the
    lease was lost and nothing was stored."""
    if not (yield Step(sql.RESOLVE_COMPLETION, params, "count")):
        return False
    if rows:
        yield Step(fields.DELETE_FIELDS, (completion_id,))
        yield Step(fields.INSERT_FIELD, rows, "many")
    return True


def circuit_failed(params: Sequence[Any]) -> Generator[Step, Any, str]:
    state = yield Step(circuits.FAILED, params, "value")
    return str(state)


def circuit_probe_now(handler: str, now: float) -> Generator[Step, Any, None]:
    yield Step(circuits.PROBE_DUE, (now, handler, now, handler))
    yield Step(circuits.PROBE_NOW, (now, now, handler, now))


def claim_reprocess(params: Sequence[Any]) -> Generator[Step, Any, bool]:
    attempts = yield Step(reprocesses.CLAIM, params, "row")
    return attempts is not None


def changed_audited(
    query: str, params: Sequence[Any], audit: AuditEntry
) -> Generator[Step, Any, int]:
    """One statement and the admin call's audit row, finished with how many rows it changed,
    in one transaction: the effect never stands without its record."""
    count = int((yield Step(query, params, "count")))
    yield Step(audit_sql.INSERT, audit_sql.insert_params(audit_sql.done(audit, count)), "row")
    return count


def inserted_id(query: str, params: Sequence[Any]) -> Generator[Step, Any, int]:
    """One ``INSERT ... RETURNING id``; the id."""
    new_id = yield Step(query, params, "value")
    return int(new_id)


def purge(before: float, limit: int) -> Generator[Step, Any, tuple[int, list[str]]]:
    """Delete up to ``limit`` delivered jobs with everything they own; return result paths."""
    rows = yield Step(queries.PURGEABLE, (before, before, limit), "rows")
    keys = [(r[0],) for r in rows]
    completions = [(r[1],) for r in rows if r[1] is not None]
    yield Step(queries.DELETE_DELIVERIES, keys, "many")
    yield Step(queries.DELETE_DISPATCHES, completions, "many")
    yield Step(queries.DELETE_COMPLETION, completions, "many")
    yield Step(queries.DELETE_JOB, keys, "many")
    return len(rows), [r[2] for r in rows if r[2]]
