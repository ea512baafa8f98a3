"""``GET /events``: completions as server-sent events, resumable with ``Last-Event-ID``.

Each event is ``event: completion``, ``id: <completion id>`` and the completion as JSON data.
Ids only grow, so a client that reconnects with the last id it saw (the ``Last-Event-ID``
header browsers send, or ``?last_event_id=``) gets every completion after it and none twice;
without one the stream starts with the next completion. A comment line is sent every
``heartbeat`` seconds (default 15) so proxies keep the connection open. At shutdown the
stream ends at once, so it never holds the server's graceful stop.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import StreamingResponse

from receiver import tracing
from receiver.admin import scope
from receiver.admin.jobs import store_of
from receiver.admin.notifier import RECHECK_SECONDS, wait_flag
from receiver.admin.query import QueryError
from receiver.admin.views import iso
from receiver.errors import StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from starlette.requests import Request

    from receiver.admin.notifier import Notifier
    from receiver.store import CompletionRow, Reads

BATCH = 100
DEFAULT_HEARTBEAT = 15.0
RETRY_MILLISECONDS = 2000


def completion_event(row: CompletionRow) -> str:
    """One completion in the text/event-stream format."""
    data = {
        "id": row.id,
        "source": row.source,
        "job_id": row.job_id,
        "state": row.state,
        "provider_status": row.provider_status,
        "metadata": row.metadata,
        "error": row.error,
        "created_at": iso(row.created_at),
        "trace_id": tracing.trace_id(row.traceparent),
    }
    return f"id: {row.id}\nevent: completion\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _last_event_id(request: Request) -> int | None:
    text = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    if text is None or text == "":
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise QueryError("invalid_query", "Last-Event-ID must be a completion id")
    return int(text)


def _heartbeat(request: Request) -> float:
    text = request.query_params.get("heartbeat")
    if text is None:
        return DEFAULT_HEARTBEAT
    try:
        seconds = float(text)
    except ValueError:
        raise QueryError("invalid_query", "heartbeat must be a number of seconds") from None
    if not math.isfinite(seconds) or not 0.1 <= seconds <= 300:
        raise QueryError("invalid_query", "heartbeat must be from 0.1 to 300 seconds")
    return seconds


async def stream_completions(
    store: Reads,
    notifier: Notifier,
    after: int,
    heartbeat: float,
    sources: Sequence[str] | None = None,
) -> AsyncIterator[str]:
    """Completions after id ``after`` as they are committed, with heartbeat comments; of
    ``sources`` only when given (a limited token's: the store skips the others, so the ids
    it sends still only grow and resume where they stopped)."""
    with notifier.watch_completions() as news:
        yield f"retry: {RETRY_MILLISECONDS}\n: stream of completions after {after}\n\n"
        quiet_since = time.monotonic()
        while True:
            try:
                rows = await store.completions_after(after, BATCH, sources=sources)
            except StoreUnavailableError:
                rows = []  # the client keeps its place; try again on the next recheck
            for row in rows:
                yield completion_event(row)
                after = row.id
            if rows:
                quiet_since = time.monotonic()
                if len(rows) == BATCH:
                    continue
            idle = time.monotonic() - quiet_since
            if idle >= heartbeat:
                yield ": heartbeat\n\n"
                quiet_since, idle = time.monotonic(), 0.0
            if notifier.closing:
                return  # the client reconnects (to another replica) from its last id
            await wait_flag(news, min(RECHECK_SECONDS, heartbeat - idle))


async def events(request: Request) -> StreamingResponse:
    store = store_of(request)
    after = _last_event_id(request)
    heartbeat = _heartbeat(request)
    if after is None:
        after = await store.last_completion_id()
    headers: dict[str, Any] = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    notifier = request.app.state.runtime.notifier
    return StreamingResponse(
        stream_completions(store, notifier, after, heartbeat, scope.sources_of(request)),
        media_type="text/event-stream",
        headers=headers,
    )
