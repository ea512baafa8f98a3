"""A faithful LandingAI ADE jobs API (parse and extract jobs, v1 and v2, as ``landingai-ade``
1.18.1 speaks them).

v1 (``client.parse_jobs``, ``client.extract_jobs``):
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

v2 (``client.v2.parse_jobs``, ``client.v2.extract_jobs``; one app serves both, as the SDK
sends v2 to its ``base_url`` when only that is set): ``POST /v2/parse/jobs`` (multipart
``document`` or ``document_url``, ``model``, ``options``, ``output_save_url``, ``service_tier``)
and ``POST /v2/extract/jobs`` (JSON ``schema`` with ``markdown`` or ``markdown_url``) answer
``{job_id, status, created_at}``; ``GET /v2/{kind}/jobs/{id}`` answers the current envelope
``{job_id, status, progress, created_at, completed_at, result?, error? {code, message},
output_url?, metadata?}`` (``metadata``, the result's receipt, only when the result went to
``output_url``); ``GET /v2/{kind}/jobs`` lists them (``page``, ``pageSize``, ``status``). With
``envelope = "data"`` parse jobs answer the older envelope the SDK's normaliser also reads
(``data``, ``failure_reason``). A v1 id is unknown to the v2 routes, and the other way round.

Outcomes by document name: ``corrupt`` fails the job, ``torn`` completes it with a failed page
(v2: pages 2 and 3 of 3), and on v2 ``stop`` ends it ``cancelled``.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from receiver.sim.polled import PolledSim, bearer, form_parts, outcome, require_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

KINDS = ("parse", "extract")
V2_PAGES = 3
"""The pages of every simulated v2 parse."""
CORRUPTED = "Document could not be processed: the file is corrupted"
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
    api: Literal["v1", "v2"] = "v1"
    markdown: str = ""
    """v2 extract: the markdown given (or the name of ``markdown_url``'s file)."""
    tier: str = "standard"


@dataclass
class LandingAISim(PolledSim):
    jobs: dict[str, AdeJob] = field(default_factory=dict)
    cut_outputs: int = 0
    """The next this many output downloads stop halfway (the connection dropped mid-body)."""
    envelope: Literal["result", "data"] = "result"
    """The v2 parse envelope served: the current one (``result``, ``error {code, message}``),
    or the older one (``data``, ``failure_reason``)."""

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/ade/{kind}/jobs", self._create, methods=["POST"]),
            Route("/v1/ade/{kind}/jobs/{job_id}", self._job, methods=["GET"]),
            Route("/v2/{kind}/jobs", self._v2_jobs, methods=["GET", "POST"]),
            Route("/v2/{kind}/jobs/{job_id}", self._v2_job, methods=["GET"]),
            Route("/outputs/{token}", self._output, methods=["GET"]),
        ])  # fmt: skip

    def status(self, job: AdeJob) -> str:
        if job.cancelled:
            return "cancelled"
        phase = self.phase(job.started)
        if phase != "done":
            return "pending" if phase == "queued" else "processing"
        if job.api == "v2" and outcome(job.name) == "stop":
            return "cancelled"
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
            answer["failure_reason"] = CORRUPTED
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
        if job is None or job.kind != request.path_params["kind"] or job.api != "v1":
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
            body = json.dumps(self.output(job)).encode()

            async def halfway() -> AsyncIterator[bytes]:
                yield body[: len(body) // 2]
                raise ConnectionAbortedError("simulated: the connection dropped mid-body")

            headers = {"Content-Length": str(len(body))}
            return self.answer(
                request,
                StreamingResponse(halfway(), headers=headers, media_type="application/json"),
            )
        return self.answer(request, JSONResponse(self.output(job)))

    def output(self, job: AdeJob) -> dict[str, Any]:
        """What a job's ``output_url`` serves: its result, as its API's GET would inline it."""
        return self.v2_result(job) if job.api == "v2" else self.result(job)

    def v2_body(self, job: AdeJob) -> dict[str, Any]:
        """``GET /v2/{kind}/jobs/{id}``: the envelope ``normalize_parse_job`` and
        ``normalize_extract_job`` read."""
        status = self.status(job)
        progress = {"pending": 0.0, "processing": 0.5}.get(status, 1.0)
        done = status in ("completed", "failed", "cancelled")
        answer: dict[str, Any] = {
            "job_id": job.id, "status": status, "progress": progress,
            "created_at": _iso(job.started),
            "completed_at": _iso(job.started + self.duration) if done else None,
            "org_id": "org-sim", "result": None, "error": None, "output_url": None,
            "metadata": None,
        }  # fmt: skip
        error = None
        if status == "failed":
            error = {"code": "document_corrupted", "message": CORRUPTED}
        elif status == "cancelled":
            error = {"code": "job_cancelled", "message": "The job was cancelled"}
        elif status == "completed":
            held = not self.gone(job.started + self.duration) and not job.consumed
            if job.zdr:
                answer["metadata"] = self.v2_metadata(job)
                if held:
                    answer["output_url"] = f"{self.public_url}/outputs/{job.token}"
            elif held:
                answer["result"] = self.v2_result(job)
        answer["error"] = error
        if job.kind == "parse" and self.envelope == "data":
            answer["data"] = answer.pop("result")
            failed = answer.pop("error")
            answer["failure_reason"] = failed["message"] if failed else None
        return answer

    def v2_metadata(self, job: AdeJob) -> dict[str, Any]:
        billing = {"service_tier": job.tier, "total_credits": 3.0}
        meta: dict[str, Any] = {
            "job_id": job.id, "duration_ms": int(self.duration * 1000), "billing": billing,
            "range_units": "unicode_codepoints",
        }  # fmt: skip
        if job.kind == "parse":
            meta.update(model_version="dpt-2-20251103", page_count=V2_PAGES,
                        failed_pages=[2, 3] if outcome(job.name) == "torn" else [])  # fmt: skip
        else:
            meta.update(model_version="extract-20251024",
                        input_markdown_chars=len(job.markdown))  # fmt: skip
        return meta

    def v2_result(self, job: AdeJob) -> dict[str, Any]:
        meta = self.v2_metadata(job)
        if job.kind == "extract":
            keys = list((job.schema or {}).get("properties", {}))[:10] or ["value"]
            extraction = {k: f"simulated {k}" for k in keys}
            meta["output_extraction_chars"] = len(json.dumps(extraction))
            return {"extraction": extraction, "markdown": job.markdown, "metadata": meta,
                    "extraction_metadata": {k: {"value": v, "ranges": None}
                                            for k, v in extraction.items()}}  # fmt: skip
        markdown = f"# {job.name}\n"
        meta["output_markdown_chars"] = len(markdown)
        box = {"xmin": 0.1, "ymin": 0.1, "xmax": 0.9, "ymax": 0.2}
        whole = {"xmin": 0.0, "ymin": 0.0, "xmax": 1.0, "ymax": 1.0}
        span = {"start": 0, "end": len(markdown)}
        heading = {"type": "text", "id": f"{job.id}-0",
                   "grounding": {"page": 1, "range": span, "box": box}}  # fmt: skip
        pages = []
        for number in range(1, V2_PAGES + 1):
            failed = number in meta["failed_pages"]
            pages.append({"type": "page", "status": "failed" if failed else "ok",
                          "reason": "the page could not be read" if failed else None,
                          "grounding": {"page": number, "box": whole},
                          "children": [heading] if number == 1 else []})  # fmt: skip
        return {"markdown": markdown, "metadata": meta,
                "structure": {"type": "document", "children": pages}}  # fmt: skip

    async def _v2_jobs(self, request: Request) -> Response:
        if request.method == "GET":
            return await self._v2_list(request)
        kind = request.path_params["kind"]
        if kind == "parse":
            parts = await form_parts(request)
            if (refused := self._gate(request)) is not None:
                return refused
            return self._v2_parse(request, {p.name: p.text for p in parts or ()},
                                  {p.name: p.filename for p in parts or ()})  # fmt: skip
        body = await request.body()
        if (refused := self._gate(request)) is not None:
            return refused
        if kind != "extract":
            return self.refuse(request, 404, {"detail": "Not Found"})
        try:
            given = json.loads(body)
        except ValueError:
            given = None
        if not isinstance(given, dict):
            return self.refuse(request, 422, {"detail": "the body must be a JSON object"})
        return self._v2_extract(request, given)

    def _v2_parse(
        self, request: Request, fields: dict[str, str], files: dict[str, str | None]
    ) -> Response:
        if "document" not in fields and "document_url" not in fields:
            return self.refuse(
                request, 422, {"detail": "either document or document_url must be provided"}
            )
        name = files.get("document") or fields.get("document_url", "").rsplit("/", 1)[-1]
        return self._v2_created(request, AdeJob(
            str(uuid.uuid4()), "parse", self.clock(), name or "document",
            zdr="output_save_url" in fields, api="v2",
            tier=fields.get("service_tier", "standard"),
        ))  # fmt: skip

    def _v2_extract(self, request: Request, given: dict[str, Any]) -> Response:
        schema, markdown, url = (given.get(k) for k in ("schema", "markdown", "markdown_url"))
        if not isinstance(schema, dict):
            return self.refuse(request, 422, {"detail": "schema must be a JSON object"})
        if (markdown is None) == (url is None):
            return self.refuse(
                request, 422, {"detail": "exactly one of markdown or markdown_url is required"}
            )
        text = markdown if isinstance(markdown, str) else str(url).rsplit("/", 1)[-1]
        tier = given.get("service_tier")
        return self._v2_created(request, AdeJob(
            str(uuid.uuid4()), "extract", self.clock(), text[:40] or "markdown",
            zdr="output_save_url" in given, schema=schema, api="v2", markdown=text,
            tier=tier if isinstance(tier, str) else "standard",
        ))  # fmt: skip

    def _v2_created(self, request: Request, job: AdeJob) -> Response:
        self.jobs[job.id] = job
        created = {"job_id": job.id, "status": "pending", "created_at": _iso(job.started)}
        return self.answer(request, JSONResponse(created))

    async def _v2_job(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["job_id"])
        if job is None or job.kind != request.path_params["kind"] or job.api != "v2":
            return self.refuse(request, 404, {"detail": "Job not found"})
        return self.answer(request, JSONResponse(self.v2_body(job)))

    async def _v2_list(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        kind, query = request.path_params["kind"], request.query_params
        try:
            page, size = int(query.get("page", "0")), int(query.get("pageSize", "10"))
        except ValueError:
            return self.refuse(request, 422, {"detail": "page and pageSize are integers"})
        if page < 0 or not 1 <= size <= 100:
            return self.refuse(request, 422, {"detail": "page ≥ 0, 1 ≤ pageSize ≤ 100"})
        jobs = [self.v2_body(j) for j in reversed(self.jobs.values())
                if j.api == "v2" and j.kind == kind]  # fmt: skip
        if "status" in query:
            jobs = [j for j in jobs if j["status"] == query["status"]]
        shown = jobs[page * size : (page + 1) * size]
        return self.answer(request, JSONResponse({
            "jobs": shown, "has_more": len(jobs) > (page + 1) * size, "org_id": "org-sim",
            "page": page, "page_size": size,
        }))  # fmt: skip

    def _gate(self, request: Request) -> Response | None:
        return self.gate(request, bearer(request))


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider landingai`` serves."""
    require_key(options, "landingai")
    sim = LandingAISim(api_key=options.api_key, duration=options.duration,
                       requests_per_minute=options.requests_per_minute or 600.0,
                       public_url=options.public_url)  # fmt: skip
    return sim.app()
