"""DocuRift: HMAC-signed webhooks whose event type is the news; ``GET /v1/documents/{id}``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.errors import PayloadError, ProviderError
from receiver.models import Event, State
from receiver.providers.base import (
    JobStatus,
    Provider,
    ResultRef,
    describe_error,
    error_code,
    job_segment,
    require_str,
)

if TYPE_CHECKING:
    from receiver.models import Via


class DocuRift(Provider):
    name = "docurift"
    signature_schemes = ("docurift",)
    # The job API's words, then the webhook's event types: the type is the only status a
    # webhook carries, so it is the provider's word kept beside the canonical state.
    status_words = {
        "pending": State.QUEUED,
        "processing": State.RUNNING,
        "completed": State.SUCCEEDED,
        "failed": State.FAILED,
        "document.processing.completed": State.SUCCEEDED,
        "document.processing.failed": State.FAILED,
    }
    webhook_has_result = False
    auth_header = "X-API-Key"
    auth_scheme = ""
    cannot_resubmit = (
        "docurift: neither the webhook (documentId, fileName) nor GET /v1/documents/{{id}} "
        "returns the document's file or URL, so it cannot be submitted again"
    )

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        event_type = require_str(body, "type")
        data = body.get("data")
        if not isinstance(data, dict):
            raise PayloadError("invalid_payload", "field 'data' is missing or not an object")
        job_id = require_str(data, "documentId")
        return self.webhook_event(
            source=source, job_id=job_id, status=event_type, via=via, message_id=message_id,
            metadata=data.get("metadata"), error=data.get("error"),
        )  # fmt: skip

    def job_path(self, job_id: str) -> str:
        return f"/v1/documents/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("status"), str):
            raise ProviderError(f"docurift document {job_id}: answer has no data.status")
        status: str = data["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result = data.get("result")
        return JobStatus(
            state=state,
            provider_status=status,
            result=ResultRef(inline=result)
            if state is State.SUCCEEDED and result is not None
            else None,
            error=describe_error(data.get("error")),
            error_code=error_code(data.get("error")),
        )
