"""What every console page shares: the templates (autoescaped), the security headers, and the
guard that sends a browser without a valid session to the login page.

Every response under ``/ui/`` carries a Content-Security-Policy that allows scripts from the
console's own files only (no inline script), forbids framing, and allows the one inline style
block of the login page through a nonce made for that response.
"""

from __future__ import annotations

import functools
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote

from starlette.datastructures import MutableHeaders
from starlette.responses import PlainTextResponse, RedirectResponse

from receiver.admin import audit
from receiver.admin.tokens import Role
from receiver.console.session import COOKIE

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.templating import Jinja2Templates
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from receiver.console.session import Session, Sessions

    Page = Callable[[Request], Awaitable[Response]]

MAX_FORM = 16 * 1024
HERE = Path(__file__).parent
STATIC = HERE / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-{nonce}'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)


def _when(at: float | str | None) -> str:
    """ISO 8601 UTC text for ``<time datetime>`` (the page's script shows it in local time)."""
    if at is None:
        return ""
    if isinstance(at, str):
        return at
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _short(at: float | str | None) -> str:
    """What a ``<time>`` shows before the script runs (and without it): UTC, to the second."""
    text = _when(at)
    return text[:19].replace("T", " ") + " UTC" if text else "—"


@functools.cache
def templates() -> Jinja2Templates:
    """The console's templates, loaded at the first page: Jinja2 is a few MB of a service's
    idle memory, and a service without an admin token never shows a page."""
    import jinja2
    from starlette.templating import Jinja2Templates

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value, in every template, whatever its file name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=_when, short=_short, q=lambda s: quote(str(s), safe=""))
    env.globals["unprefixed"] = unprefixed
    return Jinja2Templates(env=env)


class SecurityHeaders:
    """ASGI middleware: the CSP (with a fresh style nonce), no framing, no sniffing, no caching."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["csp_nonce"] = nonce

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CSP.format(nonce=nonce)
                headers["X-Frame-Options"] = "DENY"
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"
                headers.setdefault("Cache-Control", "no-store")
            await send(message)

        await self.app(scope, receive, sending)


def sessions_of(request: Request) -> Sessions:
    found: Sessions = request.app.state.console_sessions
    return found


def session_of(request: Request) -> Session | None:
    return sessions_of(request).check(request.cookies.get(COOKIE))


def to_login(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ui/login?next={quote(target, safe='')}", status_code=303)


def guarded(page: Page) -> Page:
    """``page`` for a logged-in browser; a POST must also carry the session's CSRF token
    (checked in the page, once it has read its form) - see ``checked_form``."""

    @functools.wraps(page)
    async def guard(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return to_login(request)
        request.state.session = session
        request.state.principal = session.who
        return await page(request)

    return guard


def acting(needed: Role, action: str, *, confirmed: bool = False) -> Callable[[Page], Page]:
    """A form POST that changes something: a session whose token has ``needed``'s role (else
    403, counted in the audit trail, whatever the form holds), recorded in the audit trail
    before it runs and finished after. With ``confirmed``, the form's first step (without
    ``confirm=yes``) only asks for a confirmation: it changes nothing and is not recorded."""

    def wrap(page: Page) -> Page:
        @functools.wraps(page)
        async def act(request: Request) -> Response:
            who = request.state.principal
            if not who.may(needed):
                await audit.refused(request, who, action, "forbidden")
                return PlainTextResponse(
                    f"this needs a token with the {needed.label!r} role; you are signed in "
                    f"as {who.name!r} ({who.role.label})",
                    status_code=403,
                )
            form = await form_of(request)
            if confirmed and form.get("confirm") != "yes":
                return await page(request)
            if "job_id" in request.path_params:
                target = f"{request.path_params['source']}/{request.path_params['job_id']}"
            else:
                kept = {k: v for k, v in form.items() if k not in ("csrf", "confirm") and v}
                target = " ".join(f"{k}={v}" for k, v in sorted(kept.items())) or "(all)"
            return await audit.run_audited(  # type: ignore[no-any-return]
                request, who, action, target, lambda: page(request)
            )

        return guarded(act)

    return wrap


def may(request: Request, role: str) -> bool:
    """Whether the signed-in token may take actions that need ``role`` (templates ask)."""
    who = getattr(request.state, "principal", None)
    return who is not None and who.may(Role.named(role))


async def form_of(request: Request) -> dict[str, str]:
    """A POSTed urlencoded form (every console form is one), first value of each name; empty
    when the body is another type or too big. (No multipart parser needed: no form uploads.)"""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind != "application/x-www-form-urlencoded" or len(body) > MAX_FORM:
        return {}
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=32)
    except (UnicodeDecodeError, ValueError):
        return {}
    values: dict[str, str] = {}
    for key, value in pairs:
        values.setdefault(key, value)
    return values


async def checked_form(request: Request) -> dict[str, str] | None:
    """The POSTed form when its CSRF token is this session's, else None (the caller answers
    403 and changes nothing)."""
    values = await form_of(request)
    if not sessions_of(request).csrf_matches(request.state.session, values.get("csrf")):
        return None
    return values


NOTICES = {
    "replayed": "Queued {n} deliveries again.",
    "reprocessed": "Submitted the job to its provider again.",
    "logged_out": "Logged out.",
}


PROBES = {
    "ok": "The handler's circuit was open: one probe went at once and got through, so the "
    "circuit is closed and the held deliveries go now.",
    "failed": "The handler's circuit was open: one probe went at once and failed, so the circuit "
    "stays open (the handler's last error and its next probe are below).",
    "waiting": "The handler's circuit was open: one probe went at once and has no outcome yet; "
    "reload for it.",
}


def notice(query: Mapping[str, str]) -> str | None:
    """The notice a redirect after an action asks for: one of ``NOTICES`` (and of ``PROBES``),
    never free text from the URL (a link could otherwise make the console say anything)."""
    template = NOTICES.get(query.get("done", ""))
    count = query.get("n", "0")
    n = int(count) if count.isdigit() and len(count) < 10 else 0
    if template is None:
        return None
    probe = PROBES.get(query.get("probe", ""))
    return template.format(n=n) + (f" {probe}" if probe else "")


def unprefixed(message: str | None, code: str | None) -> str:
    """An error message without the code it starts with (the page shows the code beside it)."""
    text = message or ""
    if code and text.lower().startswith(code.lower()):
        rest = text[len(code) :]
        if rest[:1] in (":", " ", ""):
            return rest.lstrip(": ").strip()
    return text


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    """A page from its template, with what every page needs: the CSRF token, the nav, the nonce."""
    session = getattr(request.state, "session", None)
    context.setdefault("message", notice(request.query_params))
    return templates().TemplateResponse(
        request,
        name,
        {
            "csrf": sessions_of(request).csrf(session) if session is not None else "",
            "nonce": request.state.csp_nonce,
            "path": request.url.path,
            "who": getattr(request.state, "principal", None),
            "may": functools.partial(may, request),
            **context,
        },
        status_code=status_code,
    )
