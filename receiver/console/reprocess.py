"""Reprocess from the console: the admin API's ``POST /jobs/{source}/{job_id}/reprocess``
endpoint, called in process (not over HTTP) when this build has it.

The endpoint belongs to the admin API; the console finds it among the app's routes
so it shows the action exactly when the API offers it, and reports the API's refusal (422
``not_reprocessable`` with its detail) in the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import Route

from receiver import jsontext
from receiver.errors import RejectedError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.types import Message

    from receiver.store import JobRow

PATH = "/jobs/{source}/{job_id}/reprocess"
FAILED = frozenset({"failed", "cancelled", "expired"})
"""States whose page offers the action (the API takes any finished job)."""


def _endpoint(app: Starlette) -> Callable[[Request], Awaitable[Response]] | None:
    for route in app.routes:
        if isinstance(route, Route) and route.path == PATH and "POST" in (route.methods or ()):
            # The bearer guard wraps it (functools.wraps); the console's session stands in.
            found: Any = getattr(route.endpoint, "__wrapped__", None)
            return found  # type: ignore[no-any-return]
    return None


def available(app: Starlette) -> bool:
    return _endpoint(app) is not None


def why_not(request: Request, job: JobRow | None) -> str | None:
    """Why the job cannot be submitted again (its provider, its state, the source's settings),
    as the admin API would answer; None when it can."""
    reprocessor = getattr(request.app.state.runtime, "reprocessor", None)
    if job is None or reprocessor is None:
        return "this jobhook has no reprocess endpoint"
    reason: str | None = reprocessor.cannot(job)
    return reason


async def run(request: Request, source: str, job_id: str) -> str | None:
    """Reprocess the job; None when the provider took it, else the reason it was refused."""
    endpoint = _endpoint(request.app)
    if endpoint is None:
        return "this jobhook has no reprocess endpoint"
    scope = {**request.scope, "path_params": {"source": source, "job_id": job_id},
             "headers": [(b"content-type", b"application/json")]}  # fmt: skip
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": b"{}", "more_body": False}

    try:
        response = await endpoint(Request(scope, receive))
    except RejectedError as exc:
        return f"{exc.reason}: {exc.detail}"
    if response.status_code < 300:
        return None
    try:
        body = jsontext.loads(bytes(response.body))
        return f"{body.get('error', 'refused')}: {body.get('detail', '')}"
    except (ValueError, AttributeError):
        return f"refused with HTTP {response.status_code}"
