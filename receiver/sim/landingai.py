"""A faithful LandingAI ADE jobs API (parse and extract jobs, as ``landingai-ade`` 1.18.1 speaks).

``POST /v1/ade/parse/jobs`` (multipart ``document`` or ``document_url``, ``model``,
``output_save_url``, ``split``) and ``POST /v1/ade/extract/jobs`` (``markdown`` or
``markdown_url``, ``schema``) answer ``{job_id}``; ``GET /v1/ade/{kind}/jobs/{id}`` answers
``{job_id, status, progress, received_at, data?, output_url?, failure_reason?, metadata?,
version}``: ``pending``, ``processing``, then ``completed``, ``failed`` or ``cancelled``. A
result is inline in ``data``, or at ``output_url`` when the submission gave an
``output_save_url`` (zero data retention) or the document's name says ``large``. Results last
``retention`` seconds (24 h); under zero data retention the URL serves once, a second request
is 404 and the job no longer holds its result. Bearer key, per-minute budget, 429 with
``Retry-After``.

Outcomes by document name: ``corrupt`` fails the job, ``torn`` completes it with a failed page.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from receiver.sim.polled import PolledSim, bearer, form_parts, outcome, require_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

KINDS = ("parse", "extract")
INPUTS = {"parse": ("document", "document_url"), "extract": ("markdown", "markdown_url")}


@dataclass
class AdeJob:
    id: str
    kind: str
    started: float
    name: str
    zdr: bool
    schema: dict[str, Any] | None = None
    cancelled: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    consumed: bool = False


@dataclass
class LandingAISim(PolledSim):
    jobs: dict[str, AdeJob] = field(default_factory=dict)
    cut_outputs: int = 0
    """The next this many output downloads stop halfway (the connection dropped mid-body)."""

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/ade/{kind}/jobs", self._create, methods=["POST"]),
            Route("/v1/ade/{kind}/jobs/{job_id}", self._job, methods=["GET"]),
            Route("/outputs/{token}", self._output, methods=["GET"]),
        ])  # fmt: skip

    def status(self, job: AdeJob) -> str:
        if job.cancelled:
            return "cancelled"
        phase = self.phase(job.started)
        if phase != "done":
            return "pending" if phase == "queued" else "processing"
        return "failed" if outcome(job.name) == "corrupt" else "completed"

    def body(self, job: AdeJob) -> dict[str, Any]:
        status = self.status(job)
        progress = {"pending": 0.0, "processing": 0.5}.get(status, 1.0)
        answer: dict[str, Any] = {
            "job_id": job.id, "status": status, "progress": progress,
            "received_at": int(job.started * 1000), "org_id": "org-sim", "version": None,
            "data": None, "output_url": None, "failure_reason": None, "metadata": None,
        }  # fmt: skip
        if status == "failed":
            answer["failure_reason"] = "Document could not be processed: the file is corrupted"
        if status != "completed":
            return answer
        answer["version"] = "dpt-2-20251103" if job.kind == "parse" else "extract-20251024"
        answer["metadata"] = self.metadata(job)
        held = not self.gone(job.started + self.duration) and not job.consumed
        if held and (job.zdr or outcome(job.name) == "large"):
            answer["output_url"] = f"{self.public_url}/outputs/{job.token}"
        elif held:
            answer["data"] = self.result(job)
        return answer

    def metadata(self, job: AdeJob) -> dict[str, Any]:
        meta: dict[str, Any] = {"credit_usage": 3.0, "duration_ms": int(self.duration * 1000),
                                "filename": job.name, "job_id": job.id, "org_id": "org-sim",
                                "version": None}  # fmt: skip
        if job.kind == "parse":
            meta["page_count"] = 2
            meta["failed_pages"] = [2] if outcome(job.name) == "torn" else []
        return meta

    def result(self, job: AdeJob) -> dict[str, Any]:
        if job.kind == "extract":
            keys = list((job.schema or {}).get("properties", {}))[:10] or ["value"]
            return {"extraction": {k: f"simulated {k}" for k in keys},
                    "extraction_metadata": {k: {"value": f"simulated {k}", "references": []}
                                            for k in keys},
                    "metadata": self.metadata(job)}  # fmt: skip
        box = {"left": 0.1, "top": 0.1, "right": 0.9, "bottom": 0.2}
        chunk = {"id": f"{job.id}-0", "type": "text", "markdown": f"# {job.name}",
                 "grounding": {"box": box, "page": 0}}  # fmt: skip
        return {"markdown": f"# {job.name}\n", "chunks": [chunk], "splits": [],
                "grounding": {}, "metadata": self.metadata(job)}  # fmt: skip

    async def _create(self, request: Request) -> Response:
        parts = await form_parts(request)
        if (refused := self._gate(request)) is not None:
            return refused
        kind = request.path_params["kind"]
        if kind not in KINDS:
            return self.refuse(request, 404, {"detail": "Not Found"})
        fields = {p.name: p for p in parts or ()}
        given, url = (fields.get(name) for name in INPUTS[kind])
        if given is None and url is None:
            return self.refuse(
                request,
                422,
                {"detail": f"either {INPUTS[kind][0]} or {INPUTS[kind][1]} must be provided"},
            )
        schema = None
        if kind == "extract":
            try:
                schema = json.loads(fields["schema"].text) if "schema" in fields else None
            except ValueError:
                schema = None
            if not isinstance(schema, dict):
                return self.refuse(request, 422, {"detail": "schema must be a JSON object"})
        name = given.filename or given.text[:40] if given is not None else ""
        name = name or (url.text.rsplit("/", 1)[-1] if url is not None else "document")
        job = AdeJob(f"cmp{uuid.uuid4().hex[:20]}", kind, self.clock(), name,
                     zdr="output_save_url" in fields, schema=schema)  # fmt: skip
        self.jobs[job.id] = job
        return self.answer(request, JSONResponse({"job_id": job.id}))

    async def _job(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["job_id"])
        if job is None or job.kind != request.path_params["kind"]:
            return self.refuse(request, 404, {"detail": "Job not found"})
        return self.answer(request, JSONResponse(self.body(job)))

    async def _output(self, request: Request) -> Response:
        # A presigned URL: no key; gone after the retention, and after one fetch under ZDR.
        job = next((j for j in self.jobs.values() if j.token == request.path_params["token"]),
                   None)  # fmt: skip
        if job is None or job.consumed or self.gone(job.started + self.duration):
            return self.refuse(request, 404, {"detail": "NoSuchKey"})
        job.consumed = job.zdr
        if self.cut_outputs > 0:
            self.cut_outputs -= 1
            body = json.dumps(self.result(job)).encode()

            async def halfway() -> AsyncIterator[bytes]:
                yield body[: len(body) // 2]
                raise ConnectionAbortedError("simulated: the connection dropped mid-body")

            headers = {"Content-Length": str(len(body))}
            return self.answer(
                request,
                StreamingResponse(halfway(), headers=headers, media_type="application/json"),
            )
        return self.answer(request, JSONResponse(self.result(job)))

    def _gate(self, request: Request) -> Response | None:
        return self.gate(request, bearer(request))


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider landingai`` serves."""
    require_key(options, "landingai")
    sim = LandingAISim(api_key=options.api_key, duration=options.duration,
                       requests_per_minute=options.requests_per_minute or 600.0,
                       public_url=options.public_url)  # fmt: skip
    return sim.app()
