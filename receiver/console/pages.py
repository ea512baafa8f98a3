"""The jobs list and a job's page, with its actions: replay to one or all handlers, reprocess.

The list reads the same query string as ``GET /jobs`` (so a console URL and an API URL filter
alike) and pages with the API's keyset cursor. Filters left empty in the form are dropped from
the URL by a redirect, so a shared link holds only what narrows the list.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import structlog
from starlette.responses import PlainTextResponse, RedirectResponse

from receiver.admin import audit, scope
from receiver.admin import jobs as jobroutes
from receiver.admin import query as jobquery
from receiver.admin import views as jobviews
from receiver.admin.tokens import Role
from receiver.console import circuits, reprocess, timeline, web
from receiver.errors import RejectedError
from receiver.models import State

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

log = structlog.get_logger("receiver.console")
PAGE_SIZE = 100
FILTERS = ("source", "state", "created_after", "created_before", "metadata", "error_code",
           "min_confidence", "field", "max_confidence", "order")  # fmt: skip


@web.guarded
async def jobs(request: Request) -> Response:
    pairs = request.query_params.multi_items()
    kept = [(k, v.strip()) for k, v in pairs if v.strip()]
    if len(kept) != len(pairs):
        return RedirectResponse(f"/ui/jobs?{urlencode(kept)}" if kept else "/ui/jobs", 303)
    q = request.query_params
    values: dict[str, Any] = {name: q.get(name, "") for name in FILTERS}
    values["metadata"] = q.get("metadata", "")
    hint = _metadata_hint(q.getlist("metadata"))
    page: dict[str, Any] = {"jobs": [], "next_cursor": None}
    error = None
    try:
        where = jobroutes.filter_from(request)
        if q.get("order") == "oldest":
            where = dataclasses.replace(where, oldest_first=True)
        cursor = q.get("cursor")
        after = jobquery.decode_cursor(cursor) if cursor else None
        page = await jobviews.jobs_page(jobroutes.store_of(request), where, PAGE_SIZE, after)
    except RejectedError as exc:
        error = exc.detail
    older = None
    if page["next_cursor"]:
        older = urlencode([*((k, v) for k, v in kept if k != "cursor"),
                           ("cursor", page["next_cursor"])])  # fmt: skip
    newest = urlencode([(k, v) for k, v in kept if k != "cursor"])
    return web.render(
        request,
        "jobs.html",
        status_code=400 if error else 200,
        jobs=page["jobs"],
        error=error,
        values=values,
        sources=scope.visible(request, sorted(request.app.state.sources)),
        states=[s.value for s in State],
        older=older,
        newest=newest if q.get("cursor") else None,
        filtered=any(k not in ("cursor", "order") for k, _ in kept),
        oldest=q.get("order") == "oldest",
        metadata_hint=hint,
        watch="news" if not q.get("cursor") else "changes",
    )


def _metadata_hint(pairs: list[str]) -> str | None:
    """The ``key=value`` spelling of metadata filters given as ``key:value`` (read the same),
    for the page to show the syntax it documents; None when every pair used ``=``."""
    colon = [jobquery.split_metadata(p) for p in pairs]
    if not any(sep == ":" for _, sep, _ in colon):
        return None
    return " ".join(f"{key}={value}" for key, _, value in colon)


@web.guarded
async def job(request: Request) -> Response:
    return await _job_page(request, request.path_params["source"], request.path_params["job_id"])


async def _job_page(
    request: Request, source: str, job_id: str, problem: str | None = None, status: int = 200
) -> Response:
    store = jobroutes.store_of(request)
    detail = await jobviews.job_detail(store, source, job_id, scope.sources_of(request))
    if detail is None:
        return web.render(request, "missing.html", status_code=404, source=source, job_id=job_id)
    row = await store.get_job(source, job_id)
    attempts = await store.attempts_for(source, job_id)
    held = await circuits.holding(store)
    for d in detail["dispatches"]:
        d["tries"] = timeline.tries(attempts, d["handler"], d["state"])
        d["held"] = held.get(d["handler"]) if d["state"] in ("pending", "running") else None
        d["circuit"] = held.get(d["handler"]) if d["state"] == "dead" else None
    doc = detail["job"]
    fields = doc.get("fields") or {}
    threshold = _threshold(request, source)
    why_not = reprocess.why_not(request, row)
    failed = doc.get("state") in reprocess.FAILED  # the console offers it for failures only
    return web.render(
        request,
        "job.html",
        status_code=status,
        job=doc,
        detail=detail,
        steps=timeline.build(detail, row, attempts),
        fields=sorted(fields.items()),
        threshold=threshold,
        handlers=[d["handler"] for d in detail["dispatches"]],
        can_reprocess=reprocess.available(request.app) and why_not is None and failed,
        why_not_reprocess=why_not,
        reprocessed_from=doc.get("reprocessed_from"),
        reprocessed_as=doc.get("reprocessed_as"),
        problem=problem,
    )


def _threshold(request: Request, source: str) -> float:
    """The source's confidence alert (its ``confidence_alert`` setting), else 0.80."""
    cfg = request.app.state.settings.sources.get(source)
    value = getattr(cfg, "confidence_alert", None)
    return float(value) if isinstance(value, int | float) else 0.80


@web.acting(Role.OPERATE, "console_replay")
async def replay(request: Request) -> Response:
    form = await web.checked_form(request)
    if form is None:
        return PlainTextResponse("the form's CSRF token is missing or wrong", status_code=403)
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    store = jobroutes.store_of(request)
    if not scope.sees(request, source) or await store.get_job(source, job_id) is None:
        return PlainTextResponse("no such job", status_code=404)
    handler = form.get("handler") or None
    count = await store.replay(
        source=source, job_id=job_id, handler=handler, include_succeeded=True,
        audit=audit.pending(request),
    )  # fmt: skip
    audit.recorded(request)
    dispatcher = request.app.state.runtime.dispatcher
    if count:
        dispatcher.wake()
    # Requeued or still waiting on an open circuit: either way the operator wants it tried now.
    replayed = [handler] if handler else [d.handler for d in await store.dispatches_for(
        source, job_id)]  # fmt: skip
    probe = await circuits.probe_held(dispatcher, store, replayed)
    log.info("job_replayed", source=source, job_id=job_id, handler=handler, requeued=count,
             probe=probe, via="console")  # fmt: skip
    done = f"done=replayed&n={count}" + (f"&probe={probe}" if probe else "")
    return RedirectResponse(f"{_job_url(source, job_id)}?{done}", 303)


@web.acting(Role.ADMIN, "console_reprocess")
async def reprocess_job(request: Request) -> Response:
    if await web.checked_form(request) is None:
        return PlainTextResponse("the form's CSRF token is missing or wrong", status_code=403)
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    problem = await reprocess.run(request, source, job_id)
    if problem is None:
        return RedirectResponse(f"{_job_url(source, job_id)}?done=reprocessed", 303)
    return await _job_page(request, source, job_id, problem, status=422)


def _job_url(source: str, job_id: str) -> str:
    return f"/ui/jobs/{quote(source, safe='')}/{quote(job_id, safe='')}"
