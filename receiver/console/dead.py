"""Dead letters: deliveries that gave up, grouped by handler and error code, and their batch
replay by the current filter - a dry-run count first, then a confirmation that requeues them
in the admin API's chunks (``receiver.admin.bulk.requeue``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

import structlog
from starlette.responses import PlainTextResponse, RedirectResponse

from receiver.admin import audit, bulk, scope
from receiver.admin import jobs as jobroutes
from receiver.admin import query as jobquery
from receiver.admin.tokens import Role
from receiver.console import circuits, web
from receiver.errors import RejectedError
from receiver.store.bulk import ReplayFilter
from receiver.store.rows import JobFilter

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

log = structlog.get_logger("receiver.console")
LIST_SIZE = 100
UNKNOWN = "unknown"  # the group of dead deliveries that carry no error code


def _selection(values: dict[str, str]) -> tuple[str | None, str | None]:
    handler = values.get("handler") or None
    code = values.get("error_code") or None
    if code is not None:
        code = jobquery.parse_code(code)
    return handler, code


def replay_filter(
    handler: str | None, code: str | None, sources: tuple[str, ...] | None = None
) -> ReplayFilter:
    """The bulk replay's filter: dead dispatches of ``handler`` in jobs failing with ``code``
    (of ``sources`` only, when the token is limited to them)."""
    jobs = JobFilter(error_code=None if code in (None, UNKNOWN) else code, sources=sources)
    return ReplayFilter(jobs, "dead", handler, None)


@web.guarded
async def dead(request: Request) -> Response:
    store = jobroutes.store_of(request)
    try:
        handler, code = _selection(dict(request.query_params))
    except RejectedError as exc:
        return PlainTextResponse(exc.detail, status_code=400)
    sources = scope.sources_of(request)
    return web.render(
        request,
        "dead.html",
        groups=await store.dead_groups(sources=sources),
        rows=await store.dead_list(handler, code, LIST_SIZE, sources=sources),
        handler=handler or "",
        code=code or "",
        confirm=None,
        held=await circuits.holding(store),
    )


@web.acting(Role.OPERATE, "console_dead_replay", confirmed=True)
async def replay(request: Request) -> Response:
    form = await web.checked_form(request)
    if form is None:
        return PlainTextResponse("the form's CSRF token is missing or wrong", status_code=403)
    try:
        handler, code = _selection(form)
    except RejectedError as exc:
        return PlainTextResponse(exc.detail, status_code=400)
    store = jobroutes.store_of(request)
    sources = scope.sources_of(request)
    f = replay_filter(handler, code, sources)
    if form.get("confirm") != "yes":
        return web.render(
            request,
            "dead.html",
            groups=await store.dead_groups(sources=sources),
            rows=await store.dead_list(handler, code, LIST_SIZE, sources=sources),
            handler=handler or "",
            code=code or "",
            confirm=await store.count_replayable(f),
            held=await circuits.holding(store),
        )
    # Before the replay: the handlers whose dead deliveries it may requeue.
    groups = await store.dead_groups(sources=sources)
    replayed = {g.handler for g in groups if handler in (None, g.handler)}
    requeued, _ = await bulk.requeue(store, f)
    audit.touched(request, requeued)
    probe = None
    if requeued:
        dispatcher = request.app.state.runtime.dispatcher
        dispatcher.wake()
        probe = await circuits.probe_held(dispatcher, store, replayed)
    log.info("jobs_replayed", requeued=requeued, handler=handler, error_code=code, probe=probe,
             via="console")  # fmt: skip
    back = urlencode({k: v for k, v in (("handler", handler), ("error_code", code)) if v})
    done = f"done=replayed&n={requeued}" + (f"&probe={probe}" if probe else "")
    return RedirectResponse(f"/ui/dead?{back}&{done}", status_code=303)
