"""What both stores pass to their statements and make of what those return: the parameters of
an event, a result or an attempt, and rows (``receiver.store.rows``) built from records."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from receiver import jsontext
from receiver.store.rows import CompletionRow, DispatchRow, JobRow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.models import Event, ResultRef
    from receiver.store.rows import Resolution


DISPATCH_COLUMNS = """id, completion_id, handler, state, attempts, next_attempt_at, last_error,
    updated_at, error_code"""
"""The columns ``dispatch_row`` reads, in its order."""


def now() -> float:
    return time.time()


def delivery_params(event: Event, at: float, job: int | None) -> tuple[Any, ...]:
    """INSERT_DELIVERY_ROW's values; ``job`` is jobhook's id of the event's job."""
    return (
        event.source,
        event.message_id,
        event.job_id,
        event.state.value,
        event.provider_status,
        at,
        job,
    )


def job_args(event: Event, at: float) -> tuple[Any, ...]:
    """The job row's arguments in UPSERT_JOB's order (both stores): source, job_id, state,
    provider_status, metadata, error, now, terminal_at, progress_done, progress_total,
    expected_pages, poll_at, error_code."""
    progress = event.progress
    return (
        event.source, event.job_id, event.state.value, event.provider_status,
        jsontext.dumps(event.metadata), event.error, at, at if event.state.terminal else None,
        progress.done if progress else None, progress.total if progress else None,
        event.expected_pages, event.poll_at, event.error_code,
    )  # fmt: skip


def result_ref_json(ref: ResultRef) -> str:
    """How a result reference is kept until its completion is resolved."""
    data: dict[str, Any] = {"inline": ref.inline, "url": ref.url, "sha256": ref.sha256}
    # Optional fields only when set, so every other reference keeps the text it had.
    if ref.assemble is not None:
        data["assemble"] = ref.assemble
    if ref.single_use:
        data["single_use"] = True
    return json.dumps(data)


def completion_phase(event: Event, resolve: bool) -> tuple[str, str | None]:
    """A new completion's phase and result reference (JSON text, or None)."""
    ref = event.result
    result_ref = None
    if ref is not None:
        result_ref = result_ref_json(ref)
    return ("resolving" if resolve else "ready"), result_ref


def completion_params(event: Event, at: float, resolve: bool, job: int) -> dict[str, Any]:
    phase, result_ref = completion_phase(event, resolve)
    return {
        "job": job,
        "source": event.source,
        "job_id": event.job_id,
        "now": at,
        "phase": phase,
        "result_ref": result_ref,
        "traceparent": event.traceparent,
    }


def resolution_params(completion_id: int, owner: str, r: Resolution) -> tuple[Any, ...]:
    state = r.state.value if r.state else None
    return (
        r.result_path,
        r.result_sha256,
        r.result_bytes,
        r.error,
        r.error_code,
        state,
        r.provider_status,
        now(),
        r.confidence,
        r.error_where,
        r.seconds,
        completion_id,
        owner,
    )


def finish_params(
    dispatch_id: int,
    owner: str,
    error: str | None,
    next_attempt_at: float | None,
    error_code: str | None = None,
) -> tuple[Any, ...]:
    at = now()
    if error is None:
        state, finished = "succeeded", at
    elif next_attempt_at is None:
        state, finished = "dead", at
    else:
        state, finished = "pending", None
    code = None if error is None else error_code
    return (state, next_attempt_at, error, code, at, finished, dispatch_id, owner)


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
        r[14] if len(r) > 14 else None,
        r[15] if len(r) > 15 else None,
        r[16] if len(r) > 16 else None,
        r[17] if len(r) > 17 else None,
    )


def dispatch_row(r: Sequence[Any]) -> DispatchRow:
    return DispatchRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8])
