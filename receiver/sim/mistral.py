"""A faithful Mistral batch API for OCR (files and batch jobs, as ``mistralai`` 3.7.0 speaks them).

``POST /v1/files`` (multipart ``file``, ``purpose``) stores a JSON Lines input; ``POST
/v1/batch/jobs`` (``{input_files, endpoint: "/v1/ocr", model?, metadata?, timeout_hours?}``)
answers a ``BatchJob``, ``GET /v1/batch/jobs/{id}`` follows it (``QUEUED``, ``RUNNING``, then
``SUCCESS``, ``TIMEOUT_EXCEEDED`` or ``CANCELLED``; ``FAILED`` when an input is not JSON
Lines), ``POST .../cancel`` cancels it; the finished job names an ``output_file`` (one line per
request: ``{id, custom_id, response: {status_code, body}, error: null}``) and an
``error_file`` (``{id, custom_id, response: null, error: {code, message}}``), served by ``GET
/v1/files/{id}/content`` until the retention passes (then 404). ``GET /v1/batch/jobs`` lists
the jobs as ``batch.jobs.list`` asks (``page``, ``page_size``, ``model``, ``agent_id``,
``created_after``, ``status`` repeated, ``order_by`` ``created`` or ``-created``, and every other
query parameter a ``metadata`` filter, as the SDK sends that mapping): ``{object: "list", total,
data}``. Bearer key, per-minute budget answered 429 with ``Retry-After``.

Outcomes: a request whose ``custom_id`` or document URL says ``corrupt`` fails (in the error
file); a job whose metadata has ``"simulate": "timeout"`` ends ``TIMEOUT_EXCEEDED`` after
writing the requests it finished.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.sim.polled import PolledSim, bearer, form_parts, outcome, require_key

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

STATUSES = ("QUEUED", "RUNNING", "SUCCESS", "FAILED", "TIMEOUT_EXCEEDED",
            "CANCELLATION_REQUESTED", "CANCELLED")  # fmt: skip
LIST_PARAMETERS = frozenset({"page", "page_size", "model", "agent_id", "created_after",
                             "created_by_me", "status", "order_by"})  # fmt: skip
"""The list's own query parameters; any other is a ``metadata`` key (the SDK's form style)."""
MAX_PAGE_SIZE = 1000
ENDPOINTS = ("/v1/ocr", "/v1/chat/completions", "/v1/embeddings", "/v1/fim/completions",
             "/v1/moderations", "/v1/chat/moderations", "/v1/classifications")  # fmt: skip


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created: float
    sample_type: str = "batch_request"

    def schema(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "file", "bytes": len(self.data),
            "created_at": int(self.created), "filename": self.filename, "purpose": self.purpose,
            "sample_type": self.sample_type, "source": "upload" if self.sample_type ==
            "batch_request" else "mistral", "num_lines": self.data.count(b"\n"),
        }  # fmt: skip


@dataclass
class BatchJob:
    id: str
    started: float
    input_files: list[str]
    endpoint: str
    model: str | None
    metadata: dict[str, Any]
    requests: list[dict[str, Any]]
    invalid: str | None = None
    cancelled: bool = False
    output_file: str | None = None
    error_file: str | None = None


@dataclass
class MistralSim(PolledSim):
    files: dict[str, StoredFile] = field(default_factory=dict)
    jobs: dict[str, BatchJob] = field(default_factory=dict)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/files", self._upload, methods=["POST"]),
            Route("/v1/files/{file_id}", self._file, methods=["GET"]),
            Route("/v1/files/{file_id}/content", self._content, methods=["GET"]),
            Route("/v1/batch/jobs", self._create, methods=["POST"]),
            Route("/v1/batch/jobs", self._list, methods=["GET"]),
            Route("/v1/batch/jobs/{job_id}", self._job, methods=["GET"]),
            Route("/v1/batch/jobs/{job_id}/cancel", self._cancel, methods=["POST"]),
        ])  # fmt: skip

    def status(self, job: BatchJob) -> str:
        if job.invalid is not None:
            return "FAILED"
        if job.cancelled:
            return "CANCELLED"
        phase = self.phase(job.started)
        if phase != "done":
            return "QUEUED" if phase == "queued" else "RUNNING"
        return "TIMEOUT_EXCEEDED" if job.metadata.get("simulate") == "timeout" else "SUCCESS"

    def body(self, job: BatchJob) -> dict[str, Any]:
        status = self.status(job)
        done = status in ("SUCCESS", "TIMEOUT_EXCEEDED")
        finished = job.requests[: len(job.requests) // 2] if status == "TIMEOUT_EXCEEDED" else (
            job.requests if done else [])  # fmt: skip
        failed = [r for r in finished if _fails(r)]
        if done and job.output_file is None:
            self._write_results(job, finished)
        errors = [{"message": job.invalid, "count": 1}] if job.invalid else []
        return {
            "id": job.id, "object": "batch", "input_files": job.input_files,
            "metadata": job.metadata, "endpoint": job.endpoint, "model": job.model,
            "agent_id": None, "output_file": job.output_file, "error_file": job.error_file,
            "errors": errors, "outputs": None, "status": status,
            "created_at": int(job.started), "total_requests": len(job.requests),
            "completed_requests": len(finished), "succeeded_requests": len(finished) - len(failed),
            "failed_requests": len(failed),
            "started_at": int(job.started) if status != "QUEUED" else None,
            "completed_at": int(job.started + self.duration) if done else None,
        }  # fmt: skip

    def _write_results(self, job: BatchJob, finished: list[dict[str, Any]]) -> None:
        out, err = [], []
        for n, request in enumerate(finished):
            custom_id = request.get("custom_id", str(n))
            line_id = f"batch-{job.id[:8]}-{n}"
            if _fails(request):
                err.append(
                    {
                        "id": line_id,
                        "custom_id": custom_id,
                        "response": None,
                        "error": {
                            "code": "3310",
                            "message": "Document could not be read: the file is corrupted",
                        },
                    }
                )
            else:
                out.append({"id": line_id, "custom_id": custom_id, "response": {
                    "status_code": 200, "body": _ocr_response(job.model, custom_id)},
                    "error": None})  # fmt: skip
        for lines, kind in ((out, "batch_result"), (err, "batch_error")):
            data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
            stored = StoredFile(str(uuid.uuid4()), f"{job.id}.jsonl", "batch", data,
                                self.clock(), sample_type=kind)  # fmt: skip
            self.files[stored.id] = stored
            if kind == "batch_result":
                job.output_file = stored.id
            elif lines:
                job.error_file = stored.id

    async def _upload(self, request: Request) -> Response:
        parts = await form_parts(request)
        if (refused := self._gate(request)) is not None:
            return refused
        upload = next((p for p in parts or () if p.name == "file" and p.filename), None)
        purpose = next((p.text for p in parts or () if p.name == "purpose"), "fine-tune")
        if upload is None:
            return self._error(request, 422, "a multipart 'file' field is required")
        stored = StoredFile(str(uuid.uuid4()), upload.filename or "input.jsonl", purpose,
                            upload.data, self.clock())  # fmt: skip
        self.files[stored.id] = stored
        return self.answer(request, JSONResponse(stored.schema()))

    async def _file(self, request: Request) -> Response:
        found = self._find_file(request)
        return found if isinstance(found, Response) else self.answer(
            request, JSONResponse(found.schema()))  # fmt: skip

    async def _content(self, request: Request) -> Response:
        found = self._find_file(request)
        if isinstance(found, Response):
            return found
        return self.answer(request, Response(found.data, media_type="application/octet-stream"))

    async def _create(self, request: Request) -> Response:
        raw = await request.body()
        if (refused := self._gate(request)) is not None:
            return refused
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("endpoint") not in ENDPOINTS:
            return self._error(request, 422, f"endpoint must be one of {', '.join(ENDPOINTS)}")
        inputs = body.get("input_files")
        if not isinstance(inputs, list) or not inputs or any(i not in self.files for i in inputs):
            return self._error(request, 422, "input_files must name uploaded files")
        requests: list[dict[str, Any]] = []
        invalid = None
        for file_id in inputs:
            for line in self.files[file_id].data.splitlines():
                try:
                    item = json.loads(line) if line.strip() else None
                except ValueError:
                    item = None
                if line.strip() and not (
                    isinstance(item, dict) and isinstance(item.get("body"), dict)
                ):
                    invalid = f"file {file_id}: every line must be a JSON object with a body"
                elif isinstance(item, dict):
                    requests.append(item)
        given = body.get("metadata")
        metadata: dict[str, Any] = given if isinstance(given, dict) else {}
        job = BatchJob(str(uuid.uuid4()), self.clock(), list(inputs), body["endpoint"],
                       body.get("model"), metadata, requests, invalid)  # fmt: skip
        self.jobs[job.id] = job
        return self.answer(request, JSONResponse(self.body(job)))

    async def _list(self, request: Request) -> Response:
        """``GET /v1/batch/jobs``: the jobs that match, newest first unless asked, a page."""
        if (refused := self._gate(request)) is not None:
            return refused
        query = request.query_params
        try:
            page = _integer(query.get("page", "0"), "page", 0)
            size = _integer(query.get("page_size", "100"), "page_size", 1, MAX_PAGE_SIZE)
            after = _timestamp(query["created_after"]) if "created_after" in query else None
        except ValueError as exc:
            return self._error(request, 422, str(exc))
        statuses = query.getlist("status")
        if any(s not in STATUSES for s in statuses):
            return self._error(request, 422, f"status must be among {', '.join(STATUSES)}")
        order = query.get("order_by", "-created")
        if order not in ("created", "-created"):
            return self._error(request, 422, "order_by must be 'created' or '-created'")
        # created_by_me changes nothing: every job here is the one key holder's.
        metadata = {k: v for k, v in query.multi_items() if k not in LIST_PARAMETERS}
        found = [
            job for job in self.jobs.values()
            if ("model" not in query or job.model == query["model"])
            and "agent_id" not in query  # no job here runs an agent
            and (after is None or job.started > after)
            and (not statuses or self.status(job) in statuses)
            and all(str(job.metadata.get(k)) == v for k, v in metadata.items())
        ]  # fmt: skip
        found.sort(key=lambda job: job.started, reverse=order == "-created")
        shown = found[page * size : (page + 1) * size]
        answer = {"object": "list", "total": len(found), "data": [self.body(j) for j in shown]}
        return self.answer(request, JSONResponse(answer))

    async def _job(self, request: Request) -> Response:
        job = self._find_job(request)
        return job if isinstance(job, Response) else self.answer(
            request, JSONResponse(self.body(job)))  # fmt: skip

    async def _cancel(self, request: Request) -> Response:
        job = self._find_job(request)
        if isinstance(job, Response):
            return job
        if self.status(job) in ("QUEUED", "RUNNING"):
            job.cancelled = True
        return self.answer(request, JSONResponse(self.body(job)))

    def _gate(self, request: Request) -> Response | None:
        return self.gate(request, bearer(request))

    def _error(self, request: Request, status: int, message: str) -> Response:
        return self.refuse(
            request,
            status,
            {"object": "error", "message": message, "type": "invalid_request_error", "code": None},
        )

    def _find_job(self, request: Request) -> BatchJob | Response:
        if (refused := self._gate(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["job_id"])
        return job if job is not None else self._error(request, 404, "Batch job not found")

    def _find_file(self, request: Request) -> StoredFile | Response:
        if (refused := self._gate(request)) is not None:
            return refused
        found = self.files.get(request.path_params["file_id"])
        if found is None or (found.sample_type != "batch_request" and self.gone(found.created)):
            return self._error(request, 404, "File not found")
        return found


def _integer(text: str, name: str, low: int, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer") from None
    if value < low or (high is not None and value > high):
        upper = f" and at most {high}" if high is not None else ""
        raise ValueError(f"{name} must be at least {low}{upper}")
    return value


def _timestamp(text: str) -> float:
    """An ISO 8601 date-time as the SDK sends it (``2026-01-02T03:04:05Z``), in Unix seconds."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("created_after must be an ISO 8601 date-time") from None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def _fails(request: dict[str, Any]) -> bool:
    body = request.get("body")
    document = body.get("document") if isinstance(body, dict) else None
    url = document.get("document_url", "") if isinstance(document, dict) else ""
    return outcome(str(request.get("custom_id", ""))) == "corrupt" or outcome(str(url)) == "corrupt"


def _ocr_response(model: str | None, custom_id: str) -> dict[str, Any]:
    return {
        "model": model or "mistral-ocr-latest",
        "pages": [{"index": 0, "markdown": f"# {custom_id}\n\nSimulated text.", "images": [],
                   "dimensions": {"dpi": 200, "height": 2200, "width": 1700}}],
        "usage_info": {"pages_processed": 1, "doc_size_bytes": 1024},
        "document_annotation": None,
    }  # fmt: skip


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider mistral`` serves."""
    require_key(options, "mistral")
    sim = MistralSim(api_key=options.api_key, duration=options.duration,
                     requests_per_minute=options.requests_per_minute or 600.0,
                     public_url=options.public_url)  # fmt: skip
    return sim.app()
