"""DocExtract: ``GET /v1/documents/{id}``, filtered listing, body-only hex HMAC webhooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.sim.jobs import Phase
from receiver.sim.shapes.base import (
    QueryError,
    Shape,
    Submission,
    hmac_hex,
    int_param,
    iso,
    json_object,
    parse_iso,
    webhook_url,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from receiver.sim.jobs import Job, Snapshot
    from receiver.sim.shapes.base import ErrorKind, ResultLink

EXTRACTOR = "ext_sim"
WEAK_EVERY = 4
"""Every 4th job (numbers 3, 7, 11...) has a weak field, as real extractions sometimes do."""


def field_confidence(job: Job) -> dict[str, float]:
    """A job's per-field confidence, the fixture's fields: ``total`` is weak (0.62, under the
    usual 0.80 alert) on every ``WEAK_EVERY``-th job, 0.91 on the others."""
    weak = job.number % WEAK_EVERY == WEAK_EVERY - 1
    return {"invoice_number": 0.98, "total": 0.62 if weak else 0.91}


def extracted_data(job: Job) -> dict[str, Any]:
    return {"invoice_number": str(1000 + job.number), "total": 1000.0 + 10 * job.pages}


def _float_param(query: Mapping[str, str], name: str) -> float | None:
    raw = query.get(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise QueryError(f"{name} must be a number") from None


def _time_param(query: Mapping[str, str], name: str) -> float | None:
    raw = query.get(name)
    return parse_iso(raw, name) if raw else None


class DocExtract(Shape):
    name = "docextract"
    ratelimit_prefix = "X-RateLimit"
    default_rpm = 100.0
    job_route = "/v1/documents/{job_id}"
    list_route = "/v1/documents"
    submit_routes = ("/v1/documents",)
    submit_status = 201
    running = (Phase("queued", "queued", 0.0), Phase("processing", "running", 0.15))
    succeeded = Phase("completed", "succeeded", 1.0)
    failed = Phase("failed", "failed", 1.0)
    failures = {
        "extraction_failed": "No text layer",
        "unsupported_format": "The document's format is not supported",
        "processing_timeout": "Processing timed out; submit the document again",
    }
    # The simulator's transient class: the document is fine, a new job of it succeeds. The
    # first two are the document's own fault, so a new job of it fails the same way.
    transient = frozenset({"processing_timeout"})

    def document_of(self, job: Job) -> str | None:
        return job.document or f"https://files.docextract.example/{job.id}.pdf"

    def read_submission(self, path: str, body: Any) -> Submission:
        # POST /v1/documents, as the guide's reprocessing describes it.
        body = json_object(body)
        for name in ("document_url", "extractor_id"):
            if not isinstance(body.get(name), str) or not body[name]:
                raise QueryError(f"{name} is required")
        metadata = json_object(body.get("metadata") or {}, "metadata")
        url = webhook_url(body.get("webhook_url"), "webhook_url")
        return Submission(metadata, "document", url, document=body["document_url"])

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        return {"id": job.id, "extractor_id": EXTRACTOR, "status": snap.phase.word,
                "metadata": job.metadata, "created_at": iso(job.created)}  # fmt: skip

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        status = snap.phase.word
        created = iso(job.created)
        if status == "failed":
            code, message = self.failure(job)
            error = {"code": code, "message": message}
            # A document keeps its source and extractor (the guide's reprocessing reads them).
            return {"id": job.id, "extractor_id": EXTRACTOR, "status": status,
                    "document_url": self.document_of(job), "mime_type": "application/pdf",
                    "error_details": error, "created_at": created}  # fmt: skip
        body: dict[str, Any] = {
            "id": job.id,
            "extractor_id": EXTRACTOR,
            "status": status,
            "created_at": created,
        }
        if status == "processing":
            body["started_at"] = iso(snap.entered_at)
        elif status == "completed":
            body.update(
                org_id="org_sim",
                document_url=self.document_of(job),
                mime_type="application/pdf",
                file_size_bytes=16_000 * job.pages,
                extracted_data=extracted_data(job),
                confidence=field_confidence(job),
                processing_time_ms=round(job.duration * 1000),
                cost_credits=job.pages,
                error_details=None,
                started_at=iso(job.entered_at(1)),
                completed_at=iso(snap.entered_at),
            )
        return body

    def list_body(
        self, jobs: list[tuple[Job, Snapshot]], query: Mapping[str, str]
    ) -> dict[str, Any]:
        limit = int_param(query, "limit", 50, 1, 100)
        offset = int_param(query, "offset", 0, 0, 10**9)
        status = query.get("status")
        words = {"queued", "processing", "completed", "failed"}
        if status and status not in words:
            raise QueryError(f"status must be one of {', '.join(sorted(words))}")
        after = _time_param(query, "created_after")
        before = _time_param(query, "created_before")
        min_confidence = _float_param(query, "min_confidence")

        def wanted(job: Job, snap: Snapshot) -> bool:
            word = snap.phase.word
            return (
                (not status or word == status)
                and (after is None or job.created >= after)
                and (before is None or job.created < before)
                and (
                    min_confidence is None
                    or (
                        word == "completed"
                        and min(field_confidence(job).values()) >= min_confidence
                    )
                )
            )

        chosen = [(job, snap) for job, snap in jobs if wanted(job, snap)]
        page = chosen[offset : offset + limit]
        items = [
            {"id": job.id, "status": snap.phase.word, "created_at": iso(job.created)}
            for job, snap in page
        ]
        return {"jobs": items, "total": len(chosen), "limit": limit, "offset": offset}

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        event = "job.completed" if phase.word == "completed" else "job.failed"
        data = {"id": job.id, "extractor_id": EXTRACTOR, "status": phase.word}
        return {"event": event, "data": data}

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        return {"error": {"code": kind, "message": message}}

    def native_headers(
        self, secret: bytes, body: bytes, event_id: str, timestamp: int
    ) -> dict[str, str]:
        return {"x-docextract-signature": hmac_hex(secret, body)}
