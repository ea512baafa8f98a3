"""``POST /jobs/reprocess`` and ``POST /jobs/{source}/{job_id}/reprocess``: submit finished jobs
again at their provider (``receiver.pipeline.reprocess`` does it, one job at a time).

The bulk body takes ``POST /jobs/replay``'s job filters (``state`` defaults to ``failed``), or
``source`` with ``ids``; ``dry_run`` counts what would be submitted and what cannot be and why,
changing nothing. A call submits at most ``limit`` jobs' worth (they go at the provider's rate
budget) and answers ``next_cursor`` while more are selected; the CLI calls until it is null.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Annotated, Any

import structlog
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse

from receiver.admin import audit, scope
from receiver.admin import query as jobquery
from receiver.admin.jobs import Name, read_model, store_of, unknown_job
from receiver.errors import RejectedError, UnknownSourceError
from receiver.pipeline.reprocess import Outcome

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.pipeline.reprocess import Reprocessor
    from receiver.store import JobRow, Store
    from receiver.store.rows import JobFilter, JobKey

log = structlog.get_logger("receiver.admin")
PER_CALL = 50
"""Jobs looked at per call by default: at ~2 provider requests a job, about a minute's budget."""
COUNT_CHUNK = 500
GIVE_UP_AFTER = 3
"""Provider failures in a row after which a call stops sending (the rest are reported, unsent)."""
TimeText = Annotated[str, Field(max_length=64)] | float


class BulkReprocessRequest(BaseModel):
    """``POST /jobs/reprocess``'s body; every filter optional, combined with AND."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Name | None = None
    ids: list[Name] | None = Field(None, min_length=1, max_length=1000)
    state: Annotated[str, Field(max_length=32)] | None = None
    created_after: TimeText | None = None
    created_before: TimeText | None = None
    metadata: list[Annotated[str, Field(max_length=1024)]] = Field([], max_length=32)
    min_confidence: float | None = None
    error_code: Annotated[str, Field(max_length=100)] | None = None
    dry_run: bool = False
    force: bool = False
    limit: int | None = Field(None, ge=1, le=1000)
    cursor: Annotated[str, Field(max_length=2048)] | None = None
    reprocess_id: Annotated[str, Field(max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = None


class OneReprocessRequest(BaseModel):
    """``POST /jobs/{source}/{job_id}/reprocess``'s optional body."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    force: bool = False


def _text(value: str | float | None) -> str | None:
    return None if value is None else str(value)


def _reprocessor(request: Request) -> Reprocessor:
    reprocessor: Reprocessor = request.app.state.runtime.reprocessor
    return reprocessor


def _not_reprocessable(detail: str) -> RejectedError:
    return RejectedError("not_reprocessable", detail, status_code=422)


def _check_source(request: Request, source: str | None) -> None:
    """404 for a source that is not configured; 422 when its provider can never resubmit."""
    if source is None:
        return
    if source not in request.app.state.sources:
        raise UnknownSourceError("unknown_source", f"no source named {source!r}")
    provider = _reprocessor(request).providers.get(source)
    if provider is not None and provider.cannot_resubmit is not None:
        raise _not_reprocessable(provider.cannot_resubmit.format(name=provider.name))


def job_filter(body: BulkReprocessRequest) -> JobFilter:
    """The jobs a bulk reprocess selects (a bad filter is QueryError, 400)."""
    if body.ids is not None and body.source is None:
        raise RejectedError("invalid_body", "ids: give the jobs' source too")
    return jobquery.build_filter(
        source=body.source,
        state=body.state or "failed",
        created_after=_text(body.created_after),
        created_before=_text(body.created_before),
        metadata=body.metadata,
        min_confidence=_text(body.min_confidence),
        error_code=body.error_code,
    )


async def _page(
    store: Store, body: BulkReprocessRequest, f: JobFilter, after: JobKey | None, size: int
) -> tuple[list[JobRow], JobKey | None]:
    """The next ``size`` selected jobs after ``after``, and where the following page starts."""
    if body.ids is not None:
        start = int(after[1]) if after is not None else 0
        rows = []
        for job_id in body.ids[start : start + size]:
            row = await store.get_job(f.source or "", job_id)
            if row is not None and (body.state is None or row.state == f.state):
                rows.append(row)
        following = start + size
        return rows, ((0.0, str(following), "") if following < len(body.ids) else None)
    listed = await store.list_jobs(f, limit=size, after=after)
    return [entry.job for entry in listed], (listed[-1].key if len(listed) == size else None)


async def _dry_run(request: Request, body: BulkReprocessRequest, f: JobFilter) -> dict[str, Any]:
    store, reprocessor = store_of(request), _reprocessor(request)
    would = already = 0
    reasons: collections.Counter[str] = collections.Counter()
    after: JobKey | None = None
    while True:
        rows, after = await _page(store, body, f, after, COUNT_CHUNK)
        for source in {row.source for row in rows}:
            ids = [row.job_id for row in rows if row.source == source]
            links = await store.reprocesses_of(source, ids)
            for row in (r for r in rows if r.source == source):
                reason = reprocessor.cannot(row)
                link = links.get(row.job_id)
                if reason is not None:
                    reasons[reason] += 1
                elif link is not None and link.state != "failed" and not body.force:
                    already += 1
                else:
                    would += 1
        if after is None:
            break
    return {"dry_run": True, "count": would, "already_reprocessed": already,
            "not_reprocessable": sum(reasons.values()), "reasons": dict(reasons)}  # fmt: skip


def _summary(outcomes: list[Outcome]) -> dict[str, Any]:
    counts = collections.Counter(o.status for o in outcomes)
    reasons = collections.Counter(
        o.detail for o in outcomes if o.status == "not_reprocessable" and o.detail
    )
    return {"submitted": counts["submitted"],
            "already_reprocessed": counts["already_reprocessed"],
            "not_reprocessable": counts["not_reprocessable"], "failed": counts["failed"],
            "reasons": dict(reasons), "jobs": [o.to_json() for o in outcomes]}  # fmt: skip


def _cursor_key(body: BulkReprocessRequest) -> JobKey | None:
    if body.cursor is None:
        return None
    if body.ids is not None:
        if not body.cursor.isdigit():
            raise jobquery.QueryError("invalid_query", "cursor is not one this service gave out")
        return (0.0, body.cursor, "")
    return jobquery.decode_cursor(body.cursor)


async def _each(reprocessor: Reprocessor, rows: list[JobRow], *, force: bool) -> list[Outcome]:
    """Reprocess one job after another; once the provider has failed ``GIVE_UP_AFTER`` in a
    row, the rest are reported failed without being sent (unclaimed: the next call sends them)."""
    outcomes: list[Outcome] = []
    streak = 0
    for row in rows:
        if streak >= GIVE_UP_AFTER:
            detail = f"not sent: the provider failed {streak} jobs in a row; call again"
            outcomes.append(Outcome(row.source, row.job_id, "failed", detail=detail))
            continue
        outcome = await reprocessor.reprocess(row, force=force)
        streak = streak + 1 if outcome.status == "failed" else 0
        outcomes.append(outcome)
    return outcomes


async def reprocess_jobs(request: Request) -> JSONResponse:
    body = await read_model(request, BulkReprocessRequest, optional=True)
    scope.may_use(request, body.source)
    f = scope.limited(request, job_filter(body))
    _check_source(request, body.source)
    after = _cursor_key(body)
    if body.dry_run:
        return JSONResponse(await _dry_run(request, body, f))
    reprocess_id = body.reprocess_id or audit.call_id(request)
    rows, following = await _page(store_of(request), body, f, after, body.limit or PER_CALL)
    outcomes = await _each(_reprocessor(request), rows, force=body.force)
    answer = _summary(outcomes)
    audit.touched(request, answer["submitted"])
    log.info("jobs_reprocessed", reprocess_id=reprocess_id, submitted=answer["submitted"],
             failed=answer["failed"], done=following is None)  # fmt: skip
    next_cursor = None
    if following is not None:
        next_cursor = following[1] if body.ids is not None else jobquery.encode_cursor(following)
    return JSONResponse({"reprocess_id": reprocess_id, **answer, "next_cursor": next_cursor})


async def reprocess_job(request: Request) -> JSONResponse:
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    body = await read_model(request, OneReprocessRequest, optional=True)
    if not scope.sees(request, source):
        raise unknown_job(source, job_id)
    _check_source(request, source)
    row = await store_of(request).get_job(source, job_id)
    if row is None:
        raise unknown_job(source, job_id)
    outcome = await _reprocessor(request).reprocess(row, force=body.force)
    audit.touched(request, int(outcome.status == "submitted"))
    if outcome.status == "not_reprocessable":
        raise _not_reprocessable(outcome.detail or "")
    if outcome.status == "failed":
        detail = f"{outcome.detail}; nothing was lost: call again to retry"
        return JSONResponse({"error": "provider_error", "detail": detail}, status_code=502)
    return JSONResponse(outcome.to_json())


def _schema(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _answer(description: str, properties: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERROR = {"description": "{error, detail}", "content": {"application/json": {
    "schema": _schema("Error")}}}  # fmt: skip
_COUNTED = ("count", "submitted", "already_reprocessed", "not_reprocessable", "failed")
_COUNTS = {name: {"type": "integer"} for name in _COUNTED}
_OUTCOME = {"type": "object", "properties": {
    "source": {"type": "string"}, "job_id": {"type": "string"},
    "status": {"type": "string", "enum": ["submitted", "already_reprocessed",
                                          "not_reprocessable", "failed"]},
    "new_job_id": {"type": "string"}, "detail": {"type": "string"}}}  # fmt: skip
_PATH = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
         for name in ("source", "job_id")]  # fmt: skip
OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("/jobs/reprocess", "post"): {
        "summary": "Submit every finished job a filter selects again at its provider",
        "requestBody": {"required": False, "content": {"application/json": {
            "schema": _schema("BulkReprocessRequest")}}},
        "responses": {
            "200": _answer("{dry_run, count, already_reprocessed, not_reprocessable, reasons}, "
                           "or {reprocess_id, submitted, ..., jobs, next_cursor}",
                           {**_COUNTS, "dry_run": {"type": "boolean"},
                            "reasons": {"type": "object"}, "reprocess_id": {"type": "string"},
                            "jobs": {"type": "array", "items": _OUTCOME},
                            "next_cursor": {"type": "string", "nullable": True}}),
            "400": _ERROR, "404": _ERROR, "413": _ERROR, "422": _ERROR}},
    ("/jobs/{source}/{job_id}/reprocess", "post"): {
        "summary": "Submit one finished job again at its provider (once, unless forced)",
        "parameters": _PATH,
        "requestBody": {"required": False, "content": {"application/json": {
            "schema": _schema("OneReprocessRequest")}}},
        "responses": {
            "200": {"description": "submitted, or already reprocessed", "content": {
                "application/json": {"schema": _OUTCOME}}},
            "400": _ERROR, "404": _ERROR, "413": _ERROR, "422": _ERROR,
            "502": _ERROR}},
}  # fmt: skip
