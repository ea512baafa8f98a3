"""Unstructured's platform API (``unstructured-client`` 0.46.4): workflow jobs, polled.

``GET /api/v1/jobs/{id}`` answers a ``JobInformation``: ``SCHEDULED``, ``IN_PROGRESS``,
``COMPLETED``, ``STOPPED`` or ``FAILED``, and ``output_node_files`` (``{file_id, node_id, ...}``).
A ``COMPLETED`` job may still hold failed files (``GET .../failed-files``: ``{document,
error}``): it is ``partial``, the failures kept in the result and the error. ``FAILED`` says why
in ``GET .../details`` (``message``). Each file's elements come from ``GET .../download?file_id=``
(the workflow's last node); an expired one answers 410. The key travels in
``unstructured-api-key``. The SDK has no webhook API: jobs are polled from the start.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from receiver.errors import PayloadError, ProviderError
from receiver.files import atomic_open
from receiver.models import Event, ResultRef, State
from receiver.providers.assembled import AssemblingJobAPI, JsonSink
from receiver.providers.base import JobStatus, Provider, job_segment, with_query

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.models import Via
    from receiver.providers.base import ListedJob

MAX_LISTED_FAILURES = 5
"""Failed files named in a partial job's error line (all of them are in the result)."""


class UnstructuredJobAPI(AssemblingJobAPI):
    """A finished job's failed files (and a failed one's message) asked for as it is polled;
    its result is every output file's elements, downloaded one by one into one document."""

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        status = await super().get_job(job_id, urgent=urgent)
        base = self.provider.job_path(job_id)
        if status.state is State.FAILED:
            details = await self._get(f"{base}/details", job_id=job_id, urgent=urgent)
            message = details.get("message") if isinstance(details, dict) else None
            if isinstance(message, str) and message:
                return dataclasses.replace(status, error=message)
            return status
        if status.state is not State.SUCCEEDED or status.result is None:
            return status
        answer = await self._get(f"{base}/failed-files", job_id=job_id, urgent=urgent)
        failed = _failed_files(answer, job_id)
        files = status.result.inline["files"]
        result = ResultRef(assemble="unstructured", inline={"files": files, "failed": failed})
        if not failed:
            return dataclasses.replace(status, result=result)
        named = "; ".join(f"{f['document']}: {f['error']}" for f in failed[:MAX_LISTED_FAILURES])
        more = len(failed) - MAX_LISTED_FAILURES
        error = f"{len(failed)} file(s) failed: {named}" + (
            f" (and {more} more)" if more > 0 else ""
        )
        return dataclasses.replace(
            status,
            state=State.PARTIAL if files else State.FAILED,
            result=result,
            error=error,
            error_code="files_failed",
        )

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """``{"job_id", "files": [{"file_id", "elements"}], "failed_files": [...]}``, each
        file's elements streamed in as they arrive."""
        spec = ref.inline if isinstance(ref.inline, dict) else {}
        files = [f for f in spec.get("files", []) if isinstance(f, str)]
        with atomic_open(dest) as out:
            sink = JsonSink(out, source=self.source)
            sink.write(b'{"job_id":')
            sink.value(job_id)
            sink.write(b',"files":[')
            for index, file_id in enumerate(files):
                sink.write(b',{"file_id":' if index else b'{"file_id":')
                sink.value(file_id)
                sink.write(b',"elements":')
                path = with_query(f"{self.provider.job_path(job_id)}/download", file_id=file_id)
                await self.download(path, job_id=job_id, what=f"file {file_id}", write=sink.write)
                sink.write(b"}")
            sink.write(b'],"failed_files":')
            sink.value(spec.get("failed", []))
            sink.write(b"}")
        return sink.sha256, sink.size


class Unstructured(Provider):
    name = "unstructured"
    status_words = {
        "SCHEDULED": State.QUEUED,
        "IN_PROGRESS": State.RUNNING,
        "COMPLETED": State.SUCCEEDED,
        "STOPPED": State.CANCELLED,
        "FAILED": State.FAILED,
    }
    auth_header = "unstructured-api-key"
    auth_scheme = ""
    webhooks = False
    job_api_class = UnstructuredJobAPI
    cannot_resubmit = (
        "unstructured: a job runs a workflow on its source connector's files; run the workflow "
        "again (POST /api/v1/workflows/{{id}}/run) rather than this job"
    )

    def default_api_base_url(self) -> str | None:
        return "https://platform.unstructuredapp.io"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError("invalid_payload", "unstructured sends no webhooks: its jobs are polled")

    def job_path(self, job_id: str) -> str:
        return f"/api/v1/jobs/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"unstructured job {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result = None
        if state is State.SUCCEEDED:
            result = ResultRef(assemble="unstructured", inline={"files": _output_files(body)})
        return JobStatus(state=state, provider_status=status, result=result)

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        return with_query("/api/v1/jobs/", status=status)

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        if not isinstance(body, list):
            raise ProviderError("unstructured job list: answer is not a list")
        jobs: list[ListedJob] = []
        for item in body:
            if isinstance(item, dict):
                job_id, status = item.get("id"), item.get("status")
                if isinstance(job_id, str) and job_id and isinstance(status, str):
                    jobs.append((job_id, status))
        return jobs, None


def _output_files(body: dict[str, Any]) -> list[str]:
    """The distinct files a finished job produced output for, in the order first named."""
    seen: dict[str, None] = {}
    nodes = body.get("output_node_files")
    for node in nodes if isinstance(nodes, list) else []:
        file_id = node.get("file_id") if isinstance(node, dict) else None
        if isinstance(file_id, str) and file_id:
            seen.setdefault(file_id)
    return list(seen)


def _failed_files(body: Any, job_id: str) -> list[dict[str, str]]:
    items = body.get("failed_files") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ProviderError(f"unstructured job {job_id}: failed-files answer has no list")
    return [
        {"document": str(item.get("document", "")), "error": str(item.get("error", ""))}
        for item in items
        if isinstance(item, dict)
    ]
