"""Logging in and out, and the console's own files (behind the session like every page).

The login page takes the admin token once and answers with the session cookie; a wrong token
gets the form again (401) and a log line without the token. Logout is a POST with the CSRF
token, so no link on another site can log an operator out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response

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
    form = await web.form_of(request)
    given = form.get("token")
    sessions = web.sessions_of(request)
    if given is None or len(given) > MAX_TOKEN or not sessions.token_matches(given):
        log.warning("console_login_refused", client=request.client.host if request.client else None)
        return _form(request, "That token is not the admin token.", 401)
    response = RedirectResponse(safe_next(form.get("next")), 303)
    sessions.set_cookie(request, response)
    log.info("console_login")
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
