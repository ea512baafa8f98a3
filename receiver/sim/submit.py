"""Submissions and cancellations: how a client's own code starts (and stops) a simulated job."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse

from receiver.sim.shapes import QueryError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from receiver.sim.journal import Reason
    from receiver.sim.simulator import Simulator


async def submit(request: Request, sim: Simulator) -> tuple[Response, Reason]:
    """A POST to one of the shape's submit routes: the job starts now, as the body asks."""
    try:
        body = json.loads(await request.body() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise QueryError("the body is not JSON") from None
    asked = sim.shape.read_submission(request.url.path, body)
    if asked.webhook_url is not None and asked.webhook_mode == "svix" and not sim.signs:
        raise QueryError("this simulator has no webhook secret to sign with (--secret)")
    # A document submitted again fails again unless its last failure was a transient one.
    previous = sim.last_job_of(asked.document) if asked.document is not None else None
    repeat = previous is not None and previous.outcome == "failed"
    code = previous.error_code if previous is not None and repeat else None
    again = repeat and (code or next(iter(sim.shape.failures))) not in sim.shape.transient
    (job_id,) = sim.create_jobs(
        1,
        outcome="failed" if again or sim.draw_failure() else "succeeded",
        error_code=code if again else None,
        document=asked.document,
        metadata=asked.metadata,
        kind=asked.kind,
        webhook_url=asked.webhook_url,
        webhook_mode=asked.webhook_mode,
        webhook_headers=asked.webhook_headers,
    )
    job = sim.jobs.get(job_id)
    assert job is not None
    answer = sim.shape.submitted_body(job, job.snapshot(sim.clock.time()))
    return JSONResponse(answer, status_code=sim.shape.submit_status), "ok"


async def cancel(request: Request, sim: Simulator) -> tuple[Response, Reason]:
    """``POST /cancel/{job_id}``: a job still running ends in the provider's cancelled word."""
    job = sim.jobs.get(request.path_params["job_id"])
    phase = sim.shape.cancelled
    if job is None or phase is None:
        body = sim.shape.error_body("not_found", "Job not found", retry_after=None,
                                    request_id=f"req_{sim.log.last_seq + 1}")  # fmt: skip
        return JSONResponse(body, status_code=404), "not_found"
    if not sim.jobs.cancel(job, phase):
        raise QueryError("the job has already finished")
    return JSONResponse({"job_id": job.id, "status": phase.word}), "ok"
