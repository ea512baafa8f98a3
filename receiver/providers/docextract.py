"""DocExtract: body-HMAC webhooks; ``GET /v1/documents/{id}`` holds the extracted fields inline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.errors import PayloadError, ProviderError
from receiver.models import Event, State
from receiver.providers.base import (
    JobStatus,
    Provider,
    ResultRef,
    Submission,
    describe_error,
    error_code,
    job_segment,
    require_str,
    with_query,
)

if TYPE_CHECKING:
    from receiver.models import Via
    from receiver.providers.base import ListedJob

LIST_PAGE_SIZE = 50
# What a finished document says about its extraction; the owner, the source file's URL and
# the (null) error are left out of the result.
RESULT_KEYS = (
    "id",
    "extractor_id",
    "status",
    "extracted_data",
    "confidence",
    "processing_time_ms",
    "mime_type",
    "file_size_bytes",
    "cost_credits",
    "created_at",
    "started_at",
    "completed_at",
)


class DocExtract(Provider):
    name = "docextract"
    signature_schemes = ("docextract",)
    status_words = {
        "queued": State.QUEUED,
        "processing": State.RUNNING,
        "completed": State.SUCCEEDED,
        "failed": State.FAILED,
    }
    webhook_has_result = False
    cannot_resubmit = None

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        event = require_str(body, "event")
        data = body.get("data")
        if not isinstance(data, dict):
            raise PayloadError("invalid_payload", "field 'data' is missing or not an object")
        job_id = require_str(data, "id")
        status = data.get("status")
        if not isinstance(status, str) or not status:
            status = event.removeprefix("job.")
        return self.webhook_event(
            source=source, job_id=job_id, status=status, via=via, message_id=message_id,
            metadata=data.get("metadata"), error=data.get("error_details"),
        )  # fmt: skip

    def job_path(self, job_id: str) -> str:
        return f"/v1/documents/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"docextract document {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result = None
        if state is State.SUCCEEDED:
            result = ResultRef(inline={key: body[key] for key in RESULT_KEYS if key in body})
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=describe_error(body.get("error_details")),
            error_code=error_code(body.get("error_details")),
        )

    def resubmission(self, body: Any, *, job_id: str, metadata: dict[str, Any]) -> Submission | str:
        # Seed 003's reprocessing: a document keeps its source URL and extractor, so the same
        # POST /v1/documents that made it makes a new job (the old one stays as it was).
        if not isinstance(body, dict):
            return f"docextract: document {job_id}: the job API answered no document"
        missing = [k for k in ("document_url", "extractor_id") if not isinstance(body.get(k), str)
                   or not body[k]]  # fmt: skip
        if missing:
            return f"docextract: document {job_id} has no {' or '.join(missing)} to submit again"
        fields = {"document_url": body["document_url"], "extractor_id": body["extractor_id"]}
        if isinstance(body.get("mime_type"), str):
            fields["mime_type"] = body["mime_type"]
        return Submission("/v1/documents", {**fields, "metadata": metadata})

    def submitted_job_id(self, body: Any) -> str:
        if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not body["id"]:
            raise ProviderError("docextract submission: the answer has no document id")
        job_id: str = body["id"]
        return job_id

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        return with_query(
            "/v1/documents", status=status, limit=LIST_PAGE_SIZE, offset=cursor or None
        )

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        if not isinstance(body, dict) or not isinstance(body.get("jobs"), list):
            raise ProviderError("docextract document list: answer has no 'jobs' list")
        jobs = [
            (job["id"], job["status"])
            for job in body["jobs"]
            if isinstance(job, dict)
            and isinstance(job.get("id"), str)
            and isinstance(job.get("status"), str)
        ]
        # Offset paging: the cursor is the next offset, while the total says there is more.
        offset, total = body.get("offset"), body.get("total")
        if not isinstance(offset, int) or not isinstance(total, int) or not body["jobs"]:
            return jobs, None
        following = offset + len(body["jobs"])
        return jobs, str(following) if following < total else None
