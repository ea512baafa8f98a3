"""Reducto: ``GET /job/{id}``, Bearer auth, Svix ``async.update`` webhooks on every change."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from receiver.sim.jobs import Phase
from receiver.sim.shapes.base import (
    QueryError,
    Shape,
    Submission,
    cursor_page,
    iso,
    json_object,
    webhook_url,
)

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
        # A table on the first page, read with "low" confidence on every 4th job (as the SDK's
        # parse blocks say: "either low or high"), so a weak block type can be shown.
        table = {
            "type": "Table",
            "content": "| item | amount |\n| --- | --- |\n| Services | 1280.00 |",
            "confidence": "low" if job.number % 4 == 3 else "high",
            "bbox": {"left": 0.1, "top": 0.3, "width": 0.8, "height": 0.2, "page": page},
        }
        blocks = [block, table] if page == 1 else [block]
        chunks.append({"content": text, "embed": text, "blocks": blocks})
    return chunks


# Codes of the SDK's ErrorDetail.name enum (reductoai 0.25.0), each with an HTTP-like number.
_NUMBERS = {"DOCUMENT_PASSWORD_PROTECTED": 422, "DOCUMENT_CORRUPT": 422, "DOCUMENT_EMPTY": 422,
            "DOCUMENT_UNSUPPORTED": 415, "DOCUMENT_TOO_LARGE": 413, "TIMEOUT": 504,
            "OVERSIZED_RESULT": 413, "INTERNAL_ERROR": 500}  # fmt: skip


# POST route -> (job type, the fields reductoai 0.25.0 requires besides input).
_KINDS = {"/parse_async": ("Parse", ()), "/extract_async": ("Extract", ()),
          "/split_async": ("Split", ("split_description",)),
          "/pipeline_async": ("Pipeline", ("pipeline_id",))}  # fmt: skip


class Reducto(Shape):
    name = "reducto"
    submit_routes = tuple(_KINDS)
    cancel_route = "/cancel/{job_id}"
    cancelled = Phase("Cancelled", "cancelled", 1.0)
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

    def read_submission(self, path: str, body: Any) -> Submission:
        body = json_object(body)
        kind, required = _KINDS[path]
        for name in ("input", *required):
            if body.get(name) in (None, "", []):
                raise QueryError(f"field {name!r} is required")
        config = json_object(body.get("async") or {}, "async")
        metadata = config.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise QueryError("async.metadata: the simulator takes a JSON object")
        hook = config.get("webhook")
        if hook is None:
            return Submission(metadata or {}, kind, webhook_mode="none")
        hook = json_object(hook, "async.webhook")
        mode = hook.get("mode", "svix")
        if mode == "svix":  # to the endpoints configured in Svix: the simulator's webhook URL
            return Submission(metadata or {}, kind, webhook_mode="svix")
        if mode != "direct":
            raise QueryError("async.webhook.mode must be 'svix' or 'direct'")
        url = webhook_url(hook.get("url"), "async.webhook.url")
        if url is None:
            raise QueryError("async.webhook.url is required in direct mode")
        return Submission(metadata or {}, kind, url, "direct")

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        return {"job_id": job.id}

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
        return {"status": status, "progress": 1.0, "reason": None, "result": _result(job, link)}

    def list_body(
        self, jobs: list[tuple[Job, Snapshot]], query: Mapping[str, str]
    ) -> dict[str, Any]:
        page, next_cursor = cursor_page(jobs, query, default=100)
        items = [
            {
                "job_id": job.id,
                "status": snap.phase.word,
                "type": job.kind or "Parse",
                "created_at": iso(job.created),
                "num_pages": job.pages,
                "raw_config": "{}",
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


def _result(job: Job, link: ResultLink | None) -> dict[str, Any]:
    """A finished job's result, in the SDK's response model for what was asked."""
    usage: dict[str, Any] = {"num_pages": job.pages, "credits": float(job.pages)}
    common = {"job_id": job.id, "duration": round(job.duration, 2), "usage": usage}
    inner: dict[str, Any]
    if link is not None:
        inner = {"type": "url", "url": link.url, "result_id": link.blob_id}
    else:
        inner = {"type": "full", "chunks": _chunks(job)}
    parse = {**common, "response_type": "parse", "result": inner}
    if job.kind == "Extract":
        fields = {"invoice_number": str(1042 + job.number), "total": 1280.0}
        return {**common, "usage": {**usage, "num_fields": len(fields)},
                "response_type": "extract", "result": [fields]}  # fmt: skip
    if job.kind == "Split":
        pages = list(range(1, job.pages + 1))
        split = {"splits": [{"name": "invoice", "pages": pages, "conf": "high"}],
                 "section_mapping": {"invoice": pages}}  # fmt: skip
        return {**common, "response_type": "split", "result": split}
    if job.kind == "Pipeline":
        return {"job_id": job.id, "usage": usage, "response_type": "pipeline",
                "result": {"parse": parse}}  # fmt: skip
    return parse
