"""Live: completions appear as they are stored, from the admin API's event stream served under
``/ui/events`` behind the session cookie (the page's script never sees the admin token)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receiver.admin import jobs as jobroutes
from receiver.admin import sse
from receiver.admin import views as jobviews
from receiver.console import web
from receiver.store.rows import JobFilter

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

RECENT = 20


@web.guarded
async def live(request: Request) -> Response:
    recent = await jobviews.jobs_page(jobroutes.store_of(request), JobFilter(), RECENT, None)
    return web.render(request, "live.html", jobs=recent["jobs"])


@web.guarded
async def events(request: Request) -> Response:
    return await sse.events(request)
