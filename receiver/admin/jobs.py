"""Admin routes over jobs: list, show, track, stats and replay (bearer-guarded in admin.py)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import structlog
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from starlette.responses import JSONResponse

from receiver import jsontext
from receiver.admin import audit, scope
from receiver.admin import query as jobquery
from receiver.admin import views as jobviews
from receiver.errors import PayloadError, RejectedError, UnknownSourceError
from receiver.models import Event, State

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.store import Store
    from receiver.store.rows import JobFilter

log = structlog.get_logger("receiver.admin")
M = TypeVar("M", bound=BaseModel)
MAX_BODY = 64 * 1024


def _utf8(text: str) -> str:
    # A lone surrogate (JSON "\ud800") cannot be stored as text.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return text


Name = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_utf8)]


class TrackRequest(BaseModel):
    """``POST /jobs``: a job the pipeline just submitted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Name
    job_id: Name
    metadata: dict[str, Any] = {}
    pages: int | None = Field(None, ge=1, le=1_000_000)


class ReplayRequest(BaseModel):
    """``POST /jobs/{source}/{job_id}/replay``: which dispatches to queue again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    handler: Name | None = None
    include_succeeded: bool = False


class UnknownJobError(RejectedError):
    """No job of that source and id is known (404)."""

    status_code = 404


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def filter_from(request: Request) -> JobFilter:
    """The filters of ``GET /jobs`` and ``GET /jobs/export``, from the query string, narrowed
    to the caller's sources."""
    q = request.query_params
    where = jobquery.build_filter(
        source=q.get("source"),
        state=q.get("state"),
        created_after=q.get("created_after"),
        created_before=q.get("created_before"),
        metadata=q.getlist("metadata"),
        min_confidence=q.get("min_confidence"),
        error_code=q.get("error_code"),
        field=q.get("field"),
        max_confidence=q.get("max_confidence"),
    )
    return scope.limited(request, where)


def unknown_job(source: str, job_id: str) -> UnknownJobError:
    """The 404 of a missing job, which is also the answer for another source's job to a
    token limited to others: the two must not be told apart."""
    return UnknownJobError("unknown_job", f"no job {job_id!r} of source {source!r}")


async def read_model(request: Request, model: type[M], *, optional: bool) -> M:
    """The JSON body validated as ``model``; 400 with the first problem when it is not."""
    body = await request.body()
    if len(body) > MAX_BODY:
        raise RejectedError("body_too_large", f"the body exceeds {MAX_BODY} bytes", status_code=413)
    if optional and not body.strip():
        return model()
    try:
        return model.model_validate(jsontext.loads(body))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RejectedError("invalid_json", "the body is not valid JSON") from None
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RejectedError("invalid_body", f"{where}: {first['msg']}") from None


async def list_jobs(request: Request) -> JSONResponse:
    where = filter_from(request)
    limit = jobquery.parse_limit(request.query_params.get("limit"))
    cursor = request.query_params.get("cursor")
    after = jobquery.decode_cursor(cursor) if cursor else None
    return JSONResponse(await jobviews.jobs_page(store_of(request), where, limit, after))


async def show_job(request: Request) -> JSONResponse:
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    sources = scope.sources_of(request)
    detail = await jobviews.job_detail(store_of(request), source, job_id, sources)
    known = request.app.state.sources.get(source)
    if detail is None and known is not None:
        # What the pipeline has at hand (a bare operation id) names the job it registered.
        with contextlib.suppress(ValueError):
            normal = known.provider.job_id(job_id)
            if normal != job_id:
                detail = await jobviews.job_detail(store_of(request), source, normal, sources)
    if detail is None:
        raise unknown_job(source, job_id)
    return JSONResponse(detail)


async def track_job(request: Request) -> JSONResponse:
    body = await read_model(request, TrackRequest, optional=False)
    scope.may_use(request, body.source)  # before the source's existence is told
    if body.source not in request.app.state.sources:
        raise UnknownSourceError("unknown_source", f"no source named {body.source!r}")
    provider = request.app.state.sources[body.source].provider
    try:
        job_id = provider.job_id(body.job_id)
    except ValueError as exc:
        raise PayloadError("invalid_job_id", f"{provider.name}: {exc}") from None
    event = Event(
        source=body.source,
        job_id=job_id,
        state=State.QUEUED,
        provider_status="tracked",
        via="track",
        metadata=body.metadata,
        expected_pages=body.pages,
    )
    await request.app.state.ingestor.ingest(event, audit=audit.pending(request))
    audit.recorded(request)
    request.app.state.runtime.poller.wake()  # its first poll may be due at once
    log.info("job_tracked", source=body.source, job_id=job_id)
    detail = await jobviews.job_detail(store_of(request), body.source, job_id)
    assert detail is not None
    return JSONResponse({"status": "tracked", "job": detail["job"]})


async def job_stats(request: Request) -> JSONResponse:
    period, seconds = jobquery.parse_period(request.query_params.get("period"))
    since = time.time() - seconds
    sources = request.app.state.settings.sources
    thresholds = {name: cfg.confidence_alert for name, cfg in sources.items()}
    stats = await jobviews.full_stats(
        store_of(request), period, since, thresholds, scope.sources_of(request)
    )
    return JSONResponse(stats)


async def replay_job(request: Request) -> JSONResponse:
    source, job_id = request.path_params["source"], request.path_params["job_id"]
    body = await read_model(request, ReplayRequest, optional=True)
    store = store_of(request)
    if not scope.sees(request, source) or await store.get_job(source, job_id) is None:
        raise unknown_job(source, job_id)
    count = await store.replay(
        source=source,
        job_id=job_id,
        handler=body.handler,
        include_succeeded=body.include_succeeded,
        audit=audit.pending(request),
    )
    audit.recorded(request)
    if count:
        request.app.state.runtime.dispatcher.wake()
    log.info("job_replayed", source=source, job_id=job_id, handler=body.handler, requeued=count)
    return JSONResponse({"requeued": count})
