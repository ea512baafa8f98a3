"""Logging in and out, and the console's own files (behind the session like every page).

The login page takes a token once and answers with the session cookie; a wrong token gets the
form again (401), a log line and an audit count without the token. Past the throttle's limit
of failures from one client address, that address gets 429 with ``Retry-After`` (no other
address is affected). Logout is a POST with the CSRF token, so no link on another site can log
an operator out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response

from receiver.admin import audit
from receiver.console import web

if TYPE_CHECKING:
    from starlette.requests import Request

log = structlog.get_logger("receiver.console")
MAX_TOKEN = 4096
ASSETS = {
    "console.css": "text/css",
    "console.js": "text/javascript",
}


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a console path only (no open redirect)."""
    if not target or not target.startswith("/ui/") or target.startswith("/ui//"):
        return "/ui/"
    return target if "\\" not in target and target.isprintable() else "/ui/"


async def login_page(request: Request) -> Response:
    if web.session_of(request) is not None:
        return RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    return _form(request, None, 200)


def _form(request: Request, error: str | None, status: int) -> Response:
    css = (web.STATIC / "console.css").read_text(encoding="utf-8")
    return web.render(
        request,
        "login.html",
        status_code=status,
        error=error,
        css=css,
        next=safe_next(request.query_params.get("next")),
    )


async def login(request: Request) -> Response:
    client = audit.client_of(request)
    throttle = request.app.state.login_throttle
    wait = throttle.retry_after(client)
    if wait is not None:
        log.warning("console_login_throttled", client=client, retry_after=wait)
        request.app.state.metrics.admin_refused.labels("login_throttled").inc()
        response = _form(request, "Too many wrong tokens from this address; wait and retry.", 429)
        response.headers["Retry-After"] = str(wait)
        return response
    form = await web.form_of(request)
    given = form.get("token")
    sessions = web.sessions_of(request)
    who = sessions.identify(given) if given is not None and len(given) <= MAX_TOKEN else None
    if who is None:
        throttle.failed(client)
        log.warning("console_login_refused", client=client)
        await audit.refused(request, None, "console_login", "login_refused")
        return _form(request, "That token is not one of this service's tokens.", 401)
    response = RedirectResponse(safe_next(form.get("next")), 303)
    sessions.set_cookie(request, response, who)
    log.info("console_login", caller=who.name, role=who.role.label, client=client)
    return response


@web.guarded
async def logout(request: Request) -> Response:
    if await web.checked_form(request) is None:
        return PlainTextResponse("the form's CSRF token is missing or wrong", status_code=403)
    response = RedirectResponse("/ui/login?done=logged_out", status_code=303)
    web.sessions_of(request).clear_cookie(request, response)
    return response


@web.guarded
async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    media = ASSETS.get(name)
    if media is None:
        return PlainTextResponse("no such file", status_code=404)
    return FileResponse(
        web.STATIC / name,
        media_type=media,
        headers={"Cache-Control": "private, no-cache"},  # revalidated: the session is checked
    )


async def favicon(request: Request) -> Response:
    """The console's icon, for every page the login page included: public, it tells nothing."""
    return FileResponse(
        web.STATIC / "favicon.svg",
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )
