"""Live: completions appear as they are stored, from the admin API's event stream served under
``/ui/events`` behind the session cookie (the page's script never sees the admin token).

The page starts with the latest completions in the order they were stored, newest first, and
the stream resumes right after the last of them, so none is missed or shown twice."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.admin import jobs as jobroutes
from receiver.admin import scope, sse
from receiver.console import web

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

RECENT = 20


@web.guarded
async def live(request: Request) -> Response:
    store = jobroutes.store_of(request)
    last = await store.last_completion_id()
    sources = scope.sources_of(request)
    recent = await store.completions_after(max(0, last - RECENT), RECENT, sources=sources)
    return web.render(request, "live.html", completions=recent[::-1], last_id=last)


@web.guarded
async def events(request: Request) -> Response:
    return await sse.events(request)
