"""Docling Serve: async convert tasks, unsigned progress callbacks, single-use results.

Its API models (docling-serve's ``TaskStatusResponse``, docling's ``ConversionStatus`` and
``ProgressCallbackRequest``) are the spec: there is no SDK. ``POST /v1/convert/source/async``
answers ``{task_id, task_status, ...}``; ``GET /v1/status/poll/{task_id}`` the same, with
``task_meta`` counts; ``GET /v1/result/{task_id}`` the result, removed a few minutes after it
is first fetched (``single_use_results``, on by default). Callbacks are progress reports,
``{task_id, progress: {kind, ...}}`` POSTed unsigned with the headers the submission chose, so
they are hints only (``webhook_mode = "direct"``). Every call carries ``X-Api-Key``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from receiver.errors import PayloadError, ProviderError
from receiver.models import Progress, State
from receiver.providers.base import (
    JobStatus,
    Provider,
    ResultRef,
    describe_error,
    error_code,
    job_segment,
    page_count,
)

if TYPE_CHECKING:
    from receiver.models import Event, Via


class Docling(Provider):
    name: ClassVar[str] = "docling"
    status_words = {
        "pending": State.QUEUED,
        "started": State.RUNNING,
        "success": State.SUCCEEDED,
        "partial_success": State.PARTIAL,
        "failure": State.FAILED,
        "skipped": State.FAILED,
    }
    auth_header = "X-Api-Key"
    auth_scheme = ""
    hint_job_field = "task_id"
    unsigned_only = True

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError(
            "no_signed_webhooks", "docling sends unsigned callbacks only: webhook_mode 'direct'"
        )

    def job_path(self, job_id: str) -> str:
        return f"/v1/status/poll/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("task_status"), str):
            raise ProviderError(f"docling task {job_id}: answer has no task_status")
        status: str = body["task_status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result = None
        if state in (State.SUCCEEDED, State.PARTIAL):
            # Relative: the job API's base URL is put in front, and its key sent with it.
            result = ResultRef(url=f"/v1/result/{job_segment(job_id)}", single_use=True)
        meta = body.get("task_meta")
        progress = None
        if isinstance(meta, dict):
            done, total = page_count(meta.get("num_processed")), page_count(meta.get("num_docs"))
            progress = Progress(done, total) if done is not None or total is not None else None
        failure = body.get("failure")
        text = body.get("error_message")
        error = text if isinstance(text, str) and text else describe_error(failure)
        if state is State.PARTIAL and error is None and isinstance(meta, dict):
            error = _partial(meta)
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=error,
            progress=progress,
            error_code=error_code(failure),
        )

    def submitted_job_id(self, body: Any) -> str:
        task_id = body.get("task_id") if isinstance(body, dict) else None
        if not isinstance(task_id, str) or not task_id:
            raise ProviderError("docling: the submission's answer has no task_id")
        return task_id


def _partial(meta: dict[str, Any]) -> str | None:
    """What a partial success's counts say: "2 of 5 documents failed"."""
    failed, total = page_count(meta.get("num_failed")), page_count(meta.get("num_docs"))
    if failed is None or total is None:
        return None
    return f"{failed} of {total} documents failed"
