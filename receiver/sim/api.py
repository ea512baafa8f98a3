"""The simulated provider's HTTP surface: its job API, gated like the real one, and its blobs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from receiver.sim import control, submit
from receiver.sim.blobs import chunks
from receiver.sim.journal import key_hash
from receiver.sim.shapes import QueryError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.requests import Request

    from receiver.sim.jobs import Job
    from receiver.sim.journal import Reason
    from receiver.sim.limits import Fault
    from receiver.sim.shapes import ErrorKind
    from receiver.sim.simulator import Simulator

    Answer = Callable[[Request, Simulator], Awaitable[tuple[Response, Reason]]]

_S3_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{}</Code><Message>{}</Message></Error>'
)
_FAULT_KINDS: dict[int, tuple[ErrorKind, str]] = {
    429: ("rate_limited", "Rate limit exceeded"),
    500: ("server_error", "Internal server error"),
    502: ("server_error", "Bad gateway"),
    503: ("server_error", "Service unavailable"),
    504: ("server_error", "Gateway timeout"),
}


def _sim(request: Request) -> Simulator:
    sim: Simulator = request.app.state.sim
    return sim


def _error(
    sim: Simulator, status: int, kind: ErrorKind, message: str, retry_after: int | None = None
) -> JSONResponse:
    body = sim.shape.error_body(
        kind, message, retry_after=retry_after, request_id=f"req_{sim.log.last_seq + 1}"
    )
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def _fault_response(sim: Simulator, fault: Fault) -> Response:
    assert fault.status is not None
    kind, message = _FAULT_KINDS.get(fault.status, ("server_error", "Injected fault"))
    retry_after = fault.retry_after
    if fault.status == 429 and retry_after is None:
        retry_after = 1
    if fault.status < 500 and fault.status != 429:
        kind = "bad_request"
    return _error(sim, fault.status, kind, message, retry_after)


async def _gated(request: Request, answer: Answer) -> Response:
    """Faults, then auth, then the rate budget, then the answer; every outcome is logged."""
    sim = _sim(request)
    arrived, started = sim.clock.time(), time.perf_counter()
    presented = sim.shape.presented_key(request.headers)
    key = key_hash(presented) if presented else None
    fault = sim.faults.take("api")
    reason: Reason
    if fault is not None and fault.latency:
        await asyncio.sleep(fault.latency)
    if fault is not None and fault.status is not None:
        response, reason = _fault_response(sim, fault), "fault"
    elif not sim.authorised(presented):
        response, reason = (
            _error(sim, 401, "unauthorized", "Invalid or missing API key"),
            "unauthorized",
        )
    else:
        assert key is not None
        decision = sim.limiter.check(key)
        if decision.allowed:
            try:
                response, reason = await answer(request, sim)
            except QueryError as exc:
                response, reason = _error(sim, 400, "bad_request", str(exc)), "bad_request"
        else:
            response = _error(sim, 429, "rate_limited", "Rate limit exceeded", decision.retry_after)
            reason = "rate_limited"
        response.headers.update(decision.headers(sim.shape.ratelimit_prefix))
    _record(sim, request, response, reason, key=key, arrived=arrived, started=started)
    return response


def _record(
    sim: Simulator,
    request: Request,
    response: Response,
    reason: Reason,
    *,
    key: str | None,
    arrived: float,
    started: float,
) -> None:
    sim.log.record(
        t=arrived,
        method=request.method,
        path=request.url.path,
        status=response.status_code,
        reason=reason,
        key=key,
        retry_after=_retry_after(response),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def _retry_after(response: Response) -> int | None:
    value = response.headers.get("retry-after")
    return int(value) if value is not None and value.isdigit() else None


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def _job(request: Request, sim: Simulator) -> tuple[Response, Reason]:
    job = sim.jobs.get(request.path_params["job_id"])
    if job is None:
        return _error(sim, 404, "not_found", sim.shape.not_found), "not_found"
    if sim.shape.long_poll:
        await _long_poll(request, sim, job)
    snap = job.snapshot(sim.clock.time())
    link = None
    if snap.phase.state == "succeeded" and job.result == "url":
        sha256 = None
        if sim.shape.reports_checksum:
            sha256 = (await sim.blobs.digest(sim.blob_spec(job))).sha256
        link = sim.blobs.presign(base_url(request), job.blob_id, sha256)
    return JSONResponse(sim.shape.job_body(job, snap, link)), "ok"


MAX_WAIT = 60.0


async def _long_poll(request: Request, sim: Simulator, job: Job) -> None:
    """``?wait=SECONDS``: answer once the job has ended, or when the wait is over."""
    raw = request.query_params.get("wait", "0")
    try:
        wait = float(raw)
    except ValueError:
        raise QueryError("wait must be a number of seconds") from None
    if not 0 <= wait <= MAX_WAIT:
        raise QueryError(f"wait must be between 0 and {MAX_WAIT:g} seconds")
    until_done = job.finishes_at - sim.clock.time()
    if wait > 0 and until_done > 0:
        await asyncio.sleep(min(wait, until_done))


async def _result(request: Request, sim: Simulator) -> tuple[Response, Reason]:
    """The result the job API serves itself; a single-use one is removed after its first fetch."""
    job = sim.jobs.get(request.path_params["job_id"])
    if job is None:
        return _error(sim, 404, "not_found", sim.shape.not_found), "not_found"
    now = sim.clock.time()
    removal = sim.shape.result_removal
    gone = (removal is not None and job.result_fetched_at is not None
            and now >= job.result_fetched_at + removal)  # fmt: skip
    if job.snapshot(now).phase.state != "succeeded" or gone:
        message = "Task result not found. Please wait for a completion status."
        return _error(sim, 404, "not_found", message), "expired" if gone else "not_found"
    if job.result_fetched_at is None:
        job.result_fetched_at = now
    job.result_fetches += 1
    pieces = list(sim.shape.result_chunks(job, job.result_bytes))
    size = sum(len(p) for p in pieces)

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    headers = {"content-length": str(size)}
    return StreamingResponse(body(), media_type="application/json", headers=headers), "ok"


async def _list(request: Request, sim: Simulator) -> tuple[Response, Reason]:
    now = sim.clock.time()
    jobs = [(job, job.snapshot(now)) for job in reversed(sim.jobs.all())]
    return JSONResponse(sim.shape.list_body(jobs, request.query_params)), "ok"


def _s3_error(status: int, code: str, message: str) -> Response:
    return Response(
        _S3_ERROR.format(code, message), status_code=status, media_type="application/xml"
    )


async def _blob(request: Request) -> Response:
    """``GET /blobs/{id}?expires=&sig=``: checked like an S3 presigned URL, then streamed."""
    sim = _sim(request)
    arrived, started = sim.clock.time(), time.perf_counter()
    blob_id = request.path_params["blob_id"]
    fault = sim.faults.take("blobs")
    if fault is not None and fault.latency:
        await asyncio.sleep(fault.latency)
    check = sim.blobs.check(
        blob_id, request.query_params.get("expires", ""), request.query_params.get("sig", "")
    )
    job = sim.jobs.by_blob(blob_id)
    reason: Reason = "ok"
    if fault is not None and fault.status is not None:
        response, reason = _s3_error(fault.status, "InternalError", "Injected fault"), "fault"
    elif check == "bad_signature":
        response = _s3_error(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
        )
        reason = "bad_signature"
    elif check == "expired":
        response, reason = _s3_error(403, "AccessDenied", "Request has expired"), "expired"
    elif job is None or job.result != "url" or job.snapshot(arrived).phase.state != "succeeded":
        response, reason = (
            _s3_error(404, "NoSuchKey", "The specified key does not exist."),
            "not_found",
        )
    else:
        spec = sim.blob_spec(job)
        size = await sim.blobs.length(spec)
        limit = fault.truncate if fault is not None else None
        headers = {"content-length": str(size)}
        response = StreamingResponse(
            chunks(spec, limit), media_type=spec.media_type, headers=headers
        )
        reason = "fault" if limit is not None else "ok"
    _record(sim, request, response, reason, key=None, arrived=arrived, started=started)
    return response


def build_app(sim: Simulator) -> Starlette:
    """The simulator's ASGI app; its lifespan runs the webhook sender."""

    async def job(request: Request) -> Response:
        return await _gated(request, _job)

    async def listing(request: Request) -> Response:
        return await _gated(request, _list)

    routes: list[Route] = []
    for job_route, list_route in ((sim.shape.job_route, sim.shape.list_route),
                                  *sim.shape.older_routes):  # fmt: skip
        routes.append(Route(job_route, job, methods=["GET"]))
        if list_route is not None:
            routes.append(Route(list_route, listing, methods=["GET"]))
    routes.append(Route("/blobs/{blob_id}", _blob, methods=["GET"]))
    if sim.shape.result_route is not None:

        async def result(request: Request) -> Response:
            return await _gated(request, _result)

        routes.append(Route(sim.shape.result_route, result, methods=["GET"]))

    async def submission(request: Request) -> Response:
        return await _gated(request, submit.submit)

    async def cancellation(request: Request) -> Response:
        return await _gated(request, submit.cancel)

    routes.extend(Route(path, submission, methods=["POST"]) for path in sim.shape.submit_routes)
    if sim.shape.cancel_route is not None:
        routes.append(Route(sim.shape.cancel_route, cancellation, methods=["POST"]))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sim:
            yield

    app = Starlette(routes=[*routes, *control.routes()], lifespan=lifespan)
    app.state.sim = sim
    return app
