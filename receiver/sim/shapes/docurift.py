"""DocuRift: ``GET /v1/documents/{id}`` with ``X-API-Key``; a webhook when a document finishes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.sim.jobs import Phase
from receiver.sim.shapes.base import (
    QueryError,
    Shape,
    Submission,
    hmac_hex,
    iso,
    json_object,
    webhook_url,
)

if TYPE_CHECKING:
    import random

    from receiver.sim.jobs import Job, Snapshot
    from receiver.sim.shapes.base import ErrorKind, ResultLink

_CODES: dict[ErrorKind, str] = {
    "unauthorized": "UNAUTHORIZED",
    "not_found": "NOT_FOUND",
    "rate_limited": "RATE_LIMITED",
    "server_error": "INTERNAL_ERROR",
    "bad_request": "BAD_REQUEST",
}


class DocuRift(Shape):
    name = "docurift"
    key_header = "x-api-key"
    bearer = False
    default_rpm = 60.0
    job_route = "/v1/documents/{job_id}"
    running = (Phase("pending", "queued", 0.0), Phase("processing", "running", 0.15))
    succeeded = Phase("completed", "succeeded", 1.0)
    failed = Phase("failed", "failed", 1.0)
    event_prefix = "evt_"
    submit_routes = ("/v1/documents",)
    submit_status = 201
    failures = {"UNREADABLE": "Page 1 could not be read"}

    def _error(self, job: Job) -> dict[str, str]:
        code, message = self.failure(job)
        return {"code": code, "message": message}

    def new_id(self, rng: random.Random) -> str:
        return f"doc_{rng.getrandbits(48):012x}"

    def read_submission(self, path: str, body: Any) -> Submission:
        # Not in the guide: a POST on the documents collection, in its camelCase style.
        body = json_object(body)
        if not isinstance(body.get("url"), str) or not body["url"]:
            raise QueryError("url is required")
        metadata = json_object(body.get("metadata") or {}, "metadata")
        url = webhook_url(body.get("webhookUrl"), "webhookUrl")
        return Submission(metadata, "document", url)

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        data = {"documentId": job.id, "status": snap.phase.word, "createdAt": iso(job.created)}
        return {"success": True, "data": data}

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        data: dict[str, Any] = {"documentId": job.id, "status": snap.phase.word}
        if snap.phase.word == "completed":
            total = f"{1000 + 10 * job.pages:.2f}"
            fields = {"invoice_number": str(1000 + job.number), "total": total}
            data["result"] = {"documentType": "invoice", "fields": fields}
        elif snap.phase.word == "failed":
            data["error"] = self._error(job)
        return {"success": True, "data": data}

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        data: dict[str, Any] = {"documentId": job.id}
        if phase.word == "completed":
            kind = "document.processing.completed"
            data.update(
                {
                    "organizationId": "org_sim",
                    "fileName": f"{job.id}.pdf",
                    "pageCount": job.pages,
                    "metadata": job.metadata,
                }
            )
        else:
            kind = "document.processing.failed"
            data["error"] = self._error(job)
        return {
            "id": event_id,
            "type": kind,
            "apiVersion": "2024-01-26",
            "createdAt": iso(at),
            "data": data,
        }

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        return {"success": False, "error": {"code": _CODES[kind], "message": message}}

    def native_headers(
        self, secret: bytes, body: bytes, event_id: str, timestamp: int
    ) -> dict[str, str]:
        signed = f"{timestamp}.".encode() + body
        return {
            "X-DocuRift-Signature": hmac_hex(secret, signed),
            "X-DocuRift-Timestamp": str(timestamp),
            "X-DocuRift-Event-Id": event_id,
        }
