"""The admin routes and their guard: a bearer token, compared in constant time.

Without ``server.admin_token`` the admin routes are not mounted at all (404), and startup logs
``admin_routes_off``. A request without the token, or with a wrong one, gets 401 and nothing
else; the token itself is never logged or echoed.
"""

from __future__ import annotations

import functools
import hmac
from typing import TYPE_CHECKING

import structlog
from starlette.responses import JSONResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request
    from starlette.responses import Response

    from receiver.secret import Secret

    Endpoint = Callable[[Request], Awaitable[Response]]

log = structlog.get_logger("receiver.admin")


def token_matches(header: str | None, token: Secret) -> bool:
    """True when ``header`` is ``Bearer <token>``; the comparison takes constant time."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.reveal().encode())


def guarded(endpoint: Endpoint, token: Secret) -> Endpoint:
    """``endpoint`` behind the bearer token: 401 (and a ``WWW-Authenticate``) without it."""

    @functools.wraps(endpoint)
    async def guard(request: Request) -> Response:
        # A reload may have rotated the token: the app's current one, read once.
        current: Secret = getattr(request.app.state, "admin_token", token)
        if not token_matches(request.headers.get("authorization"), current):
            reason = "missing_token" if "authorization" not in request.headers else "wrong_token"
            log.warning("admin_unauthorized", path=request.url.path, reason=reason)
            return JSONResponse(
                {"error": "unauthorized", "detail": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="jobhook"'},
            )
        return await endpoint(request)

    return guard


def admin_routes(token: Secret | None) -> list[Route]:
    """The admin routes, guarded; none when no token is configured.

    Fixed paths come before ``/jobs/{source}/{job_id}`` so ``/jobs/stats`` and ``/jobs/export``
    are never taken for a job.
    """
    if token is None:
        return []
    # Imported only when mounted: a service without a token never loads what they need.
    from receiver.admin import bulk, export, longpoll, reprocess, sse, status
    from receiver.admin import jobs as jobroutes

    table: list[tuple[str, Endpoint, str]] = [
        ("/jobs", jobroutes.list_jobs, "GET"),
        ("/jobs", jobroutes.track_job, "POST"),
        ("/jobs/stats", jobroutes.job_stats, "GET"),
        ("/jobs/export", export.export_jobs, "GET"),
        ("/jobs/replay", bulk.replay_jobs, "POST"),
        ("/jobs/reprocess", reprocess.reprocess_jobs, "POST"),
        ("/jobs/{source}/{job_id}", jobroutes.show_job, "GET"),
        ("/jobs/{source}/{job_id}/wait", longpoll.wait, "GET"),
        ("/jobs/{source}/{job_id}/replay", jobroutes.replay_job, "POST"),
        ("/jobs/{source}/{job_id}/reprocess", reprocess.reprocess_job, "POST"),
        ("/events", sse.events, "GET"),
        ("/status", status.service_status, "GET"),
    ]
    return [
        Route(path, guarded(endpoint, token), methods=[method], name=endpoint.__name__)
        for path, endpoint, method in table
    ]
