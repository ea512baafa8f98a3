"""The admin routes and their guard: a bearer token, its role, and the audit trail.

Without any token (``server.admin_token`` or ``[[server.tokens]]``) the admin routes are not
mounted at all (404), and startup logs ``admin_routes_off``. A request without a known token
gets 401; one whose token's role is below the route's gets 403 naming the role it needs. Both
are counted in the audit trail; the token itself is never logged, stored or echoed. A POST
that passes is recorded before it runs and finished after (``receiver.admin.audit``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import structlog
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.admin import audit
from receiver.admin.tokens import Keyring, Principal, Role, bearer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request
    from starlette.responses import Response

    Endpoint = Callable[[Request], Awaitable[Response]]

log = structlog.get_logger("receiver.admin")


def keyring_of(request: Request) -> Keyring:
    keyring: Keyring = request.app.state.keyring
    return keyring


def caller(request: Request) -> Principal | None:
    """The token of the request's bearer header, as configured now; None when unknown."""
    given = bearer(request.headers.get("authorization"))
    return keyring_of(request).identify(given) if given is not None else None


def unauthorized() -> JSONResponse:
    return JSONResponse(
        {"error": "unauthorized", "detail": "a valid bearer token is required"},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="jobhook"'},
    )


def forbidden(who: Principal, needed: Role) -> JSONResponse:
    """403 naming the role the call needs (and the caller's, which it knows already)."""
    return JSONResponse(
        {"error": "forbidden", "needs": needed.label, "role": who.role.label,
         "detail": f"this needs a token with the {needed.label!r} role; token {who.name!r} "
                   f"has {who.role.label!r}"},
        status_code=403,
    )  # fmt: skip


def guarded(endpoint: Endpoint, needed: Role, *, audited: bool) -> Endpoint:
    """``endpoint`` behind a token of at least ``needed``'s role; ``audited`` calls (the ones
    that change something) leave an audit row."""
    action = endpoint.__name__

    @functools.wraps(endpoint)
    async def guard(request: Request) -> Response:
        who = caller(request)
        if who is None:
            reason = "missing_token" if "authorization" not in request.headers else "wrong_token"
            log.warning("admin_unauthorized", path=request.url.path, reason=reason)
            await audit.refused(request, None, action, reason)
            return unauthorized()
        request.state.principal = who
        if not who.may(needed):
            log.warning("admin_forbidden", path=request.url.path, caller=who.name,
                        role=who.role.label, needs=needed.label)  # fmt: skip
            await audit.refused(request, who, action, "forbidden")
            return forbidden(who, needed)
        # The call's own log lines say whose it was (each request runs in its own task).
        with structlog.contextvars.bound_contextvars(caller=who.name):
            if not audited:
                return await endpoint(request)
            target = await audit.target_of(request)
            if target is None:  # a dry run changes nothing
                return await endpoint(request)
            return await audit.run_audited(  # type: ignore[no-any-return]
                request, who, action, target, lambda: endpoint(request)
            )

    guard.needed = needed  # type: ignore[attr-defined]
    return guard


def admin_routes(any_token: bool) -> list[Route]:
    """The admin routes, guarded; none when no token is configured.

    Fixed paths come before ``/jobs/{source}/{job_id}`` so ``/jobs/stats`` and ``/jobs/export``
    are never taken for a job.
    """
    if not any_token:
        return []
    # Imported only when mounted: a service without a token never loads what they need.
    from receiver.admin import bulk, export, longpoll, reprocess, sse, status
    from receiver.admin import jobs as jobroutes

    return [
        Route(path, guarded(endpoint, role, audited=method == "POST"), methods=[method],
              name=endpoint.__name__)
        for path, endpoint, method, role in (
            ("/jobs", jobroutes.list_jobs, "GET", Role.READ),
            ("/jobs", jobroutes.track_job, "POST", Role.TRACK),
            ("/jobs/stats", jobroutes.job_stats, "GET", Role.READ),
            ("/jobs/export", export.export_jobs, "GET", Role.READ),
            ("/jobs/replay", bulk.replay_jobs, "POST", Role.OPERATE),
            ("/jobs/reprocess", reprocess.reprocess_jobs, "POST", Role.ADMIN),
            ("/jobs/{source}/{job_id}", jobroutes.show_job, "GET", Role.READ),
            ("/jobs/{source}/{job_id}/wait", longpoll.wait, "GET", Role.READ),
            ("/jobs/{source}/{job_id}/replay", jobroutes.replay_job, "POST", Role.OPERATE),
            ("/jobs/{source}/{job_id}/reprocess", reprocess.reprocess_job, "POST", Role.ADMIN),
            ("/events", sse.events, "GET", Role.READ),
            ("/status", status.service_status, "GET", Role.READ),
            ("/audit", audit.list_audit, "GET", Role.ADMIN),
        )
    ]  # fmt: skip


def required_roles() -> dict[tuple[str, str], str]:
    """(path, method) -> the role each admin route needs, for the OpenAPI document."""
    return {
        (route.path, method.lower()): route.endpoint.needed.label  # type: ignore[attr-defined]
        for route in admin_routes(True)
        for method in route.methods or ()
        if method != "HEAD"
    }
