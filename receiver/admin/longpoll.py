"""``GET /jobs/{source}/{job_id}/wait?timeout=``: answer as soon as the job is terminal.

The request watches the job in the Notifier before it reads the store, so news committed in
between is not missed; it re-reads on each piece of news and, for other replicas' news, at
least every ``RECHECK_SECONDS``. 200 with the job when it is terminal; 202 with the job as it
stands when ``timeout`` (default 30 s, at most 300 s) passes first; 404 for an unknown job.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from receiver.admin import scope
from receiver.admin import views as jobviews
from receiver.admin.jobs import store_of, unknown_job
from receiver.admin.notifier import RECHECK_SECONDS, wait_flag
from receiver.admin.query import QueryError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from starlette.requests import Request

    from receiver.admin.notifier import Notifier
    from receiver.store import Store

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 300.0


def parse_timeout(text: str | None) -> float:
    if text is None:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        raise QueryError("invalid_query", "timeout must be a number of seconds") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_TIMEOUT:
        raise QueryError("invalid_query", f"timeout must be from 0 to {MAX_TIMEOUT:g} seconds")
    return seconds


async def wait_for_job(
    store: Store,
    notifier: Notifier,
    source: str,
    job_id: str,
    seconds: float,
    gone: Callable[[], Awaitable[bool]] | None = None,
    sources: Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """The job's document once terminal, or as it stands after ``seconds``; None if unknown
    (or of a source other than ``sources``, a limited token's).

    ``gone`` says the caller hung up, which ends the wait early.
    """
    deadline = time.monotonic() + seconds
    with notifier.watch(source, job_id) as news:
        while True:
            detail = await jobviews.job_detail(store, source, job_id, sources)
            if detail is None or detail["job"]["terminal"]:
                return detail
            left = deadline - time.monotonic()
            if left <= 0 or notifier.closing or (gone is not None and await gone()):
                return detail
            await wait_flag(news, min(left, RECHECK_SECONDS))


async def wait(request: Request) -> JSONResponse:
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    timeout = parse_timeout(request.query_params.get("timeout"))
    notifier = request.app.state.runtime.notifier
    detail = await wait_for_job(store_of(request), notifier, source, job_id, timeout,
                                request.is_disconnected, scope.sources_of(request))  # fmt: skip
    if detail is None:
        raise unknown_job(source, job_id)
    return JSONResponse(detail, status_code=200 if detail["job"]["terminal"] else 202)
