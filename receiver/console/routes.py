"""The console's routes under ``/ui``: none unless a token is configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.routing import Mount, Route

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

PREFIX = "/ui"


async def _home(request: Request) -> Response:
    """The jobs list, with the filters the link carried (``/ui/?state=failed``)."""
    query = request.url.query
    return RedirectResponse(f"/ui/jobs?{query}" if query else "/ui/jobs", status_code=303)


async def _unknown(request: Request) -> Response:
    return PlainTextResponse("no such page", status_code=404)


def console_routes(any_token: bool) -> list[Mount]:
    """``/ui/...`` behind the login, with the security headers on every answer; none (404)
    without ``server.admin_token`` or ``[[server.tokens]]``."""
    if not any_token:
        return []
    # Imported only when mounted: a service without a token never loads the pages.
    from receiver.console import auditlog, auth, dead, live, overview, pages, web

    routes = [
        Route("/", web.guarded(_home), methods=["GET"], name="console_home"),
        Route("/login", auth.login_page, methods=["GET"]),
        Route("/login", auth.login, methods=["POST"]),
        Route("/logout", auth.logout, methods=["POST"]),
        Route("/static/favicon.svg", auth.favicon, methods=["GET"]),
        Route("/static/{name}", auth.asset, methods=["GET"]),
        Route("/jobs", pages.jobs, methods=["GET"]),
        Route("/jobs/{source}/{job_id}", pages.job, methods=["GET"]),
        Route("/jobs/{source}/{job_id}/replay", pages.replay, methods=["POST"]),
        Route("/jobs/{source}/{job_id}/reprocess", pages.reprocess_job, methods=["POST"]),
        Route("/dead", dead.dead, methods=["GET"]),
        Route("/dead/replay", dead.replay, methods=["POST"]),
        Route("/overview", overview.overview, methods=["GET"]),
        Route("/live", live.live, methods=["GET"]),
        Route("/audit", auditlog.audit_page, methods=["GET"]),
        Route("/events", live.events, methods=["GET"]),
        # Any other path: the login first, so nothing tells a stranger what exists.
        Route("/{rest:path}", web.guarded(_unknown), methods=["GET", "POST"]),
    ]
    # "/ui" itself is redirected to "/ui/" by the router (redirect_slashes).
    return [Mount(PREFIX, routes=routes, middleware=[Middleware(web.SecurityHeaders)])]
