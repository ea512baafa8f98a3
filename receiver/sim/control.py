"""The ``/_sim`` control API: create jobs, inject faults, read the log and the webhooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.sim.journal import safe_url

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.sim.simulator import Simulator


class JobRequest(BaseModel):
    """The body of ``POST /_sim/jobs``; omitted fields take the simulator's defaults."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(1, ge=1, le=100_000)
    pages: int | None = Field(None, ge=1, le=1_000_000)
    outcome: Literal["succeeded", "failed"] = "succeeded"
    result: Literal["inline", "url"] | None = None
    duration: float | None = Field(None, ge=0)
    result_bytes: int | None = Field(None, ge=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    error_code: str | None = None
    """A failed job's error code, one its provider documents (the first by default)."""


class FaultRequest(BaseModel):
    """The body of ``POST /_sim/faults``: what the next ``count`` requests to ``target`` get."""

    model_config = ConfigDict(extra="forbid")

    count: int = Field(1, ge=1)
    status: int | None = Field(None, ge=400, le=599)
    retry_after: int | None = Field(None, ge=0)
    latency: float = Field(0.0, ge=0, le=300)
    target: Literal["api", "blobs"] = "api"
    truncate: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _does_something(self) -> FaultRequest:
        if self.status is None and not self.latency and self.truncate is None:
            raise ValueError("give a status, a latency or a truncate length")
        if self.truncate is not None and self.target != "blobs":
            raise ValueError("truncate applies to target 'blobs' only")
        return self


def _sim(request: Request) -> Simulator:
    sim: Simulator = request.app.state.sim
    return sim


def _invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": "invalid_request", "detail": message}, status_code=400)


async def _body(request: Request) -> bytes:
    return await request.body() or b"{}"


async def create_jobs(request: Request) -> Response:
    try:
        spec = JobRequest.model_validate_json(await _body(request))
        ids = _sim(request).create_jobs(**spec.model_dump())
    except ValidationError as exc:
        return _invalid("; ".join(e["msg"] for e in exc.errors(include_url=False)))
    except ValueError as exc:
        return _invalid(str(exc))
    return JSONResponse({"job_ids": ids}, status_code=201)


async def list_jobs(request: Request) -> Response:
    sim = _sim(request)
    return JSONResponse({"jobs": [sim.job_view(job.id) for job in sim.jobs.all()]})


async def get_job(request: Request) -> Response:
    view = _sim(request).job_view(request.path_params["job_id"])
    if view is None:
        return JSONResponse({"error": "not_found"}, status_code=404)
    return JSONResponse(view)


async def read_log(request: Request) -> Response:
    """``GET /_sim/log?since=N&path=/prefix``: entries after sequence number N."""
    sim = _sim(request)
    raw = request.query_params.get("since", "0")
    if not raw.isdigit():
        return _invalid("since must be a non-negative integer")
    entries = sim.log.entries(int(raw), request.query_params.get("path"))
    return JSONResponse({"entries": [e.to_json() for e in entries], "last_seq": sim.log.last_seq})


async def add_fault(request: Request) -> Response:
    try:
        fault = FaultRequest.model_validate_json(await _body(request))
    except ValidationError as exc:
        return _invalid("; ".join(e["msg"] for e in exc.errors(include_url=False)))
    sim = _sim(request)
    sim.inject(**fault.model_dump())
    return JSONResponse({"pending": len(sim.faults.pending())}, status_code=201)


async def clear_faults(request: Request) -> Response:
    _sim(request).faults.clear()
    return Response(status_code=204)


async def webhooks(request: Request) -> Response:
    return JSONResponse({"webhooks": [d.to_json() for d in _sim(request).deliveries]})


async def describe(request: Request) -> Response:
    """What this simulator is (no secrets): provider, routes, rate budget, webhook target."""
    sim = _sim(request)
    return JSONResponse(
        {
            "provider": sim.provider,
            "job_route": sim.shape.job_route,
            "list_route": sim.shape.list_route,
            "requests_per_window": sim.limiter.limit,
            "rate_window": sim.limiter.window,
            "speed": sim.speed,
            "webhook_url": safe_url(sim.sender.settings.url),
            "drop": sim.sender.settings.drop,
            "jobs": len(sim.jobs),
        }
    )


def routes() -> list[Route]:
    return [
        Route("/_sim", describe, methods=["GET"]),
        Route("/_sim/jobs", create_jobs, methods=["POST"]),
        Route("/_sim/jobs", list_jobs, methods=["GET"]),
        Route("/_sim/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/_sim/log", read_log, methods=["GET"]),
        Route("/_sim/faults", add_fault, methods=["POST"]),
        Route("/_sim/faults", clear_faults, methods=["DELETE"]),
        Route("/_sim/webhooks", webhooks, methods=["GET"]),
    ]
