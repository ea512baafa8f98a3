"""``POST /jobs/replay``: requeue the dispatches of every job a filter selects, in chunks.

The body takes ``GET /jobs``'s filters plus ``dispatch_state`` (``dead``, the default, or
``succeeded``), ``handler``, ``since`` (the dispatch last touched at or after), ``dry_run``
(answer the count, change nothing), and for callers that show progress ``limit`` (requeue at
most about this many in this call) with ``cursor`` (the previous answer's ``next_cursor``) and
``replay_id`` (the first answer's, so every call logs under one id). Each chunk of
``CHUNK`` rows is its own short transaction; between chunks the loop yields to intake.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Annotated, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse

from receiver.admin import audit, scope
from receiver.admin import query as jobquery
from receiver.admin.jobs import Name, read_model, store_of
from receiver.store.bulk import ReplayFilter

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.store import Store

log = structlog.get_logger("receiver.admin")
CHUNK = 500
TimeText = Annotated[str, Field(max_length=64)] | float


class BulkReplayRequest(BaseModel):
    """``POST /jobs/replay``'s body; every filter optional, combined with AND."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Name | None = None
    state: Annotated[str, Field(max_length=32)] | None = None
    created_after: TimeText | None = None
    created_before: TimeText | None = None
    metadata: list[Annotated[str, Field(max_length=1024)]] = Field([], max_length=32)
    min_confidence: float | None = None
    error_code: Annotated[str, Field(max_length=100)] | None = None
    field: Annotated[str, Field(max_length=200)] | None = None
    max_confidence: float | None = None
    dispatch_state: Literal["dead", "succeeded"] = "dead"
    handler: Name | None = None
    since: TimeText | None = None
    dry_run: bool = False
    limit: int | None = Field(None, ge=1, le=10_000_000)
    cursor: Annotated[str, Field(max_length=20, pattern=r"^[0-9]+$")] | None = None
    replay_id: Annotated[str, Field(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = None


def _text(value: str | float | None) -> str | None:
    return None if value is None else str(value)


def replay_filter(body: BulkReplayRequest) -> ReplayFilter:
    """The store's filter from the body (a bad filter is QueryError, 400)."""
    jobs = jobquery.build_filter(
        source=body.source,
        state=body.state,
        created_after=_text(body.created_after),
        created_before=_text(body.created_before),
        metadata=body.metadata,
        min_confidence=_text(body.min_confidence),
        error_code=body.error_code,
        field=body.field,
        max_confidence=_text(body.max_confidence),
    )
    since = jobquery.parse_time("since", str(body.since)) if body.since is not None else None
    return ReplayFilter(jobs, body.dispatch_state, body.handler, since)


async def requeue(
    store: Store, f: ReplayFilter, *, after_id: int = 0, limit: int | None = None
) -> tuple[int, int | None]:
    """Requeue chunk by chunk from ``after_id``; stop after about ``limit`` rows looked at.
    Returns (requeued, the id to continue after, or None when nothing is left)."""
    requeued = looked = 0
    cursor: int | None = after_id
    while cursor is not None and (limit is None or looked < limit):
        size = CHUNK if limit is None else min(CHUNK, limit - looked)
        changed, cursor = await store.replay_chunk(f, cursor, size, time.time())
        requeued += changed
        looked += size
        await asyncio.sleep(0)  # let intake's requests in between chunks
    return requeued, cursor


async def replay_jobs(request: Request) -> JSONResponse:
    body = await read_model(request, BulkReplayRequest, optional=True)
    scope.may_use(request, body.source)
    f = replay_filter(body)
    f = dataclasses.replace(f, jobs=scope.limited(request, f.jobs))
    store = store_of(request)
    if body.dry_run:
        return JSONResponse({"dry_run": True, "count": await store.count_replayable(f)})
    replay_id = body.replay_id or audit.call_id(request)
    after = int(body.cursor) if body.cursor else 0
    requeued, cursor = await requeue(store, f, after_id=after, limit=body.limit)
    audit.touched(request, requeued)
    if requeued:
        request.app.state.runtime.dispatcher.wake()
    log.info("jobs_replayed", replay_id=replay_id, requeued=requeued, done=cursor is None,
             handler=f.handler, dispatch_state=f.dispatch_state)  # fmt: skip
    next_cursor = None if cursor is None else str(cursor)
    return JSONResponse({"replay_id": replay_id, "requeued": requeued, "next_cursor": next_cursor})


OPERATION = {
    "summary": "Requeue the dead (or succeeded) dispatches of every job a filter selects",
    "requestBody": {"required": False, "content": {"application/json": {"schema": {
        "type": "object", "properties": {
            "source": {"type": "string"}, "state": {"type": "string"},
            "created_after": {"type": "string"}, "created_before": {"type": "string"},
            "metadata": {"type": "array", "items": {"type": "string"}},
            "min_confidence": {"type": "number"}, "error_code": {"type": "string"},
            "field": {"type": "string"}, "max_confidence": {"type": "number"},
            "dispatch_state": {"type": "string", "enum": ["dead", "succeeded"]},
            "handler": {"type": "string"}, "since": {"type": "string"},
            "dry_run": {"type": "boolean"}, "limit": {"type": "integer", "minimum": 1},
            "cursor": {"type": "string"}, "replay_id": {"type": "string"}}}}}},
}  # fmt: skip
