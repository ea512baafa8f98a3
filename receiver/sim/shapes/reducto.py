"""Reducto: ``GET /job/{id}``, Bearer auth, Svix ``async.update`` webhooks on every change."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from receiver.sim.jobs import Phase
from receiver.sim.shapes.base import Shape, cursor_page, iso

if TYPE_CHECKING:
    import random
    from collections.abc import Mapping

    from receiver.sim.jobs import Job, Snapshot
    from receiver.sim.shapes.base import ErrorKind, ResultLink


def _chunks(job: Job) -> list[dict[str, Any]]:
    chunks = []
    for page in range(1, job.pages + 1):
        text = f"Page {page} of job {job.id}: Invoice 1042, total 1280.00"
        block = {
            "type": "Text",
            "content": text,
            "confidence": "high",
            "bbox": {"left": 0.1, "top": 0.1, "width": 0.3, "height": 0.05, "page": page},
        }
        chunks.append({"content": text, "embed": text, "blocks": [block]})
    return chunks


# Codes of the SDK's ErrorDetail.name enum (reductoai 0.25.0), each with an HTTP-like number.
_NUMBERS = {"DOCUMENT_PASSWORD_PROTECTED": 422, "DOCUMENT_CORRUPT": 422, "DOCUMENT_EMPTY": 422,
            "DOCUMENT_UNSUPPORTED": 415, "DOCUMENT_TOO_LARGE": 413, "TIMEOUT": 504,
            "OVERSIZED_RESULT": 413, "INTERNAL_ERROR": 500}  # fmt: skip


class Reducto(Shape):
    name = "reducto"
    failures = {
        "DOCUMENT_PASSWORD_PROTECTED": "Document could not be opened: file is encrypted",
        "DOCUMENT_CORRUPT": "Document could not be read: the file is corrupt",
        "DOCUMENT_EMPTY": "Document has no pages",
        "DOCUMENT_UNSUPPORTED": "Document type is not supported",
        "DOCUMENT_TOO_LARGE": "Document is larger than the page limit",
        "TIMEOUT": "Processing timed out",
        "OVERSIZED_RESULT": "The result is larger than the maximum result size",
        "INTERNAL_ERROR": "Internal error while processing the document",
    }
    results = ("inline", "url")
    job_route = "/job/{job_id}"
    list_route = "/jobs"
    running = (
        Phase("Pending", "queued", 0.0),
        Phase("InProgress", "running", 0.15),
        Phase("Completing", "running", 0.9, success_only=True),
    )
    succeeded = Phase("Completed", "succeeded", 1.0)
    failed = Phase("Failed", "failed", 1.0)
    webhook_on_running = True

    def new_id(self, rng: random.Random) -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        status = snap.phase.word
        if status == "Failed":
            code, reason = self.failure(job)
            error = {"code": _NUMBERS[code], "message": reason, "name": code, "job_id": job.id}
            return {"status": status, "progress": None, "reason": reason, "error": error,
                    "result": None}  # fmt: skip
        if status != "Completed":
            progress = round(snap.progress, 2)
            return {"status": status, "progress": progress, "reason": None, "result": None}
        inner: dict[str, Any]
        if link is not None:
            inner = {"type": "url", "url": link.url, "result_id": link.blob_id}
        else:
            inner = {"type": "full", "chunks": _chunks(job)}
        result = {
            "job_id": job.id,
            "duration": round(job.duration, 2),
            "usage": {"num_pages": job.pages, "credits": float(job.pages)},
            "result": inner,
        }
        return {"status": status, "progress": 1.0, "reason": None, "result": result}

    def list_body(
        self, jobs: list[tuple[Job, Snapshot]], query: Mapping[str, str]
    ) -> dict[str, Any]:
        page, next_cursor = cursor_page(jobs, query, default=100)
        items = [
            {
                "job_id": job.id,
                "status": snap.phase.word,
                "type": "Parse",
                "created_at": iso(job.created),
                "num_pages": job.pages,
            }
            for job, snap in page
        ]
        return {"jobs": items, "next_cursor": next_cursor}

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        return {"status": phase.word, "job_id": job.id, "metadata": job.metadata}

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        return {"detail": message}
