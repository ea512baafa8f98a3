"""A faithful Unstructured platform API (jobs, as ``unstructured-client`` 0.46.4 speaks them).

``POST /api/v1/jobs/`` (multipart: ``request_data`` JSON and ``input_files[]``) creates an
ephemeral job and answers its ``JobInformation``; ``GET /api/v1/jobs/{id}`` (and ``/details``,
``/failed-files``, ``/download?file_id=``), ``POST /api/v1/jobs/{id}/cancel`` and ``GET
/api/v1/jobs/`` (``?status=``) follow it. The key is ``unstructured-api-key``; over the
per-minute budget the answer is 429 with ``Retry-After``; a result past its retention is 410.

Outcomes by file name: ``corrupt`` fails that file (the job still ``COMPLETED``, the file in
``failed-files``; every file corrupt: ``FAILED``), ``stop`` stops the job (``STOPPED``),
``expired`` answers that file's download 410 as if its retention had passed.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.sim.polled import PolledSim, form_parts, outcome, require_key

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

NODES = (("partition", "partition", "unstructured_api"), ("chunk", "chunk", "chunk_by_title"))


@dataclass
class UnstructuredJob:
    id: str
    started: float
    files: list[tuple[str, str]]
    """(file id, file name) of every input file."""
    workflow_name: str
    stopped: bool = False

    def corrupt(self) -> list[tuple[str, str]]:
        return [(fid, name) for fid, name in self.files if outcome(name) == "corrupt"]


@dataclass
class UnstructuredSim(PolledSim):
    jobs: dict[str, UnstructuredJob] = field(default_factory=dict)

    def app(self) -> Starlette:
        base = "/api/v1/jobs"
        return Starlette(routes=[
            Route(base + "/", self._jobs, methods=["GET", "POST"]),
            Route(base + "/{job_id}", self._job, methods=["GET"]),
            Route(base + "/{job_id}/details", self._details, methods=["GET"]),
            Route(base + "/{job_id}/failed-files", self._failed, methods=["GET"]),
            Route(base + "/{job_id}/download", self._download, methods=["GET"]),
            Route(base + "/{job_id}/cancel", self._cancel, methods=["POST"]),
        ])  # fmt: skip

    def status(self, job: UnstructuredJob) -> str:
        phase = self.phase(job.started)
        if job.stopped or (phase == "done" and any(outcome(n) == "stop" for _, n in job.files)):
            return "STOPPED"
        if phase != "done":
            return "SCHEDULED" if phase == "queued" else "IN_PROGRESS"
        return "FAILED" if len(job.corrupt()) == len(job.files) else "COMPLETED"

    def info(self, job: UnstructuredJob) -> dict[str, Any]:
        status = self.status(job)
        failed = {fid for fid, _ in job.corrupt()}
        outputs = None
        if status == "COMPLETED":
            outputs = [
                {"file_id": fid, "node_id": f"{job.id}-{node}", "node_type": kind,
                 "node_subtype": sub}
                for fid, _ in job.files if fid not in failed for node, kind, sub in NODES
            ]  # fmt: skip
        return {
            "id": job.id, "workflow_id": job.id, "workflow_name": job.workflow_name,
            "status": status, "created_at": _iso(job.started), "job_type": "ephemeral",
            "input_file_ids": [fid for fid, _ in job.files], "output_node_files": outputs,
            "runtime": None,
        }  # fmt: skip

    async def _jobs(self, request: Request) -> Response:
        if request.method == "GET":
            if (refused := self._gate(request)) is not None:
                return refused
            wanted = request.query_params.get("status")
            listed = [self.info(j) for j in self.jobs.values()]
            listed = [j for j in listed if wanted is None or j["status"] == wanted]
            return self.answer(request, JSONResponse(listed))
        parts = await form_parts(request)
        if (refused := self._gate(request)) is not None:
            return refused
        fields = {p.name: p.text for p in parts or () if p.filename is None}
        uploads = [p for p in parts or () if p.filename is not None]
        try:
            data = json.loads(fields.get("request_data", ""))
        except ValueError:
            data = None
        if not isinstance(data, dict) or not uploads:
            return self.refuse(request, 422, {"detail": [{"loc": ["body", "request_data"],
                               "msg": "request_data (JSON) and input_files are required",
                               "type": "value_error"}]})  # fmt: skip
        files = [(str(uuid.uuid4()), u.filename or "document") for u in uploads]
        job = UnstructuredJob(str(uuid.uuid4()), self.clock(), files,
                              str(data.get("template_id") or "ephemeral"))  # fmt: skip
        self.jobs[job.id] = job
        return self.answer(request, JSONResponse(self.info(job)))

    async def _job(self, request: Request) -> Response:
        job = self._find(request)
        return (
            job if isinstance(job, Response) else self.answer(request, JSONResponse(self.info(job)))
        )

    async def _details(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        status = self.status(job)
        processing = {"COMPLETED": "COMPLETED_WITH_ERRORS" if job.corrupt() else "SUCCESS"}
        done = len(job.files) - len(job.corrupt()) if status in ("COMPLETED", "FAILED") else 0
        message = None
        if status == "FAILED":
            message = "every file failed to partition: " + ", ".join(n for _, n in job.files)
        body = {
            "id": job.id, "processing_status": processing.get(status, status),
            "message": message,
            "node_stats": [{"node_name": node, "node_type": kind, "node_subtype": sub,
                            "ready": 0, "in_progress": 0, "success": done,
                            "failure": len(job.corrupt()) if status in ("COMPLETED", "FAILED")
                            else 0} for node, kind, sub in NODES],
        }  # fmt: skip
        return self.answer(request, JSONResponse(body))

    async def _failed(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        failed = []
        if self.status(job) in ("COMPLETED", "FAILED"):
            failed = [{"document": name, "error": "Unable to partition: the file is corrupted"}
                      for _, name in job.corrupt()]  # fmt: skip
        return self.answer(request, JSONResponse({"failed_files": failed}))

    async def _download(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        file_id = request.query_params.get("file_id")
        name = dict(job.files).get(file_id or "")
        if self.status(job) != "COMPLETED" or name is None or outcome(name) == "corrupt":
            return self.refuse(request, 404, {"detail": f"no output for file {file_id!r}"})
        if self.gone(job.started + self.duration) or outcome(name) == "expired":
            return self.refuse(request, 410, {"detail": "the job's output has expired"})
        elements = [
            {"type": "Title", "element_id": f"{file_id}-0", "text": name,
             "metadata": {"filename": name, "page_number": 1}},
            {"type": "NarrativeText", "element_id": f"{file_id}-1",
             "text": f"Simulated text of {name}.", "metadata": {"filename": name,
                                                                 "page_number": 1}},
        ]  # fmt: skip
        return self.answer(request, JSONResponse(elements))

    async def _cancel(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        if self.status(job) in ("SCHEDULED", "IN_PROGRESS"):
            job.stopped = True
        return self.answer(request, JSONResponse({"id": job.id, "status": self.status(job)}))

    def _gate(self, request: Request) -> Response | None:
        return self.gate(request, request.headers.get("unstructured-api-key"))

    def _find(self, request: Request) -> UnstructuredJob | Response:
        if (refused := self._gate(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["job_id"])
        if job is None:
            return self.refuse(request, 404, {"detail": "Job not found"})
        return job


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider unstructured`` serves."""
    require_key(options, "unstructured")
    sim = UnstructuredSim(api_key=options.api_key, duration=options.duration,
                          requests_per_minute=options.requests_per_minute or 600.0,
                          public_url=options.public_url)  # fmt: skip
    return sim.app()
