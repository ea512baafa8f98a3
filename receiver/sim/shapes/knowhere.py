"""Knowhere: ``GET /v2/jobs/{id}`` (and v1), 60 requests a minute, zip results at expiring URLs."""

from __future__ import annotations

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
    from collections.abc import Mapping

    from receiver.sim.jobs import Job, Snapshot
    from receiver.sim.shapes.base import ErrorKind, ResultLink

_CODES: dict[ErrorKind, str] = {
    "unauthorized": "UNAUTHENTICATED",
    "not_found": "NOT_FOUND",
    "rate_limited": "RESOURCE_EXHAUSTED",
    "server_error": "INTERNAL",
    "bad_request": "INVALID_ARGUMENT",
}


class Knowhere(Shape):
    name = "knowhere"
    default_rpm = 60.0
    results = ("url",)
    blob_kind = "zip"
    reports_checksum = True
    job_route = "/v2/jobs/{job_id}"
    list_route = "/v2/jobs"
    older_routes = (("/v1/jobs/{job_id}", "/v1/jobs"),)
    submit_routes = ("/v2/jobs", "/v1/jobs")
    running = (
        Phase("waiting-file", "queued", 0.0),
        Phase("pending", "queued", 0.05),
        Phase("converting", "running", 0.1),
        Phase("running", "running", 0.2),
    )
    succeeded = Phase("done", "succeeded", 1.0)
    failed = Phase("failed", "failed", 1.0)
    failures = {
        "PARSE_ERROR": "Unsupported file type",
        "DEADLINE_EXCEEDED": "Parsing did not finish in time",
        "INTERNAL": "Internal error while parsing",
    }

    def read_submission(self, path: str, body: Any) -> Submission:
        # knowhere-python-sdk 2.2.1's jobs.create body.
        body = json_object(body)
        if body.get("source_type") != "url":
            raise QueryError("source_type: the simulator takes 'url' sources (no uploads)")
        if not isinstance(body.get("source_url"), str) or not body["source_url"]:
            raise QueryError("source_url is required when source_type is 'url'")
        hook = json_object(body.get("webhook") or {}, "webhook")
        url = webhook_url(hook.get("url"), "webhook.url")
        metadata = {k: body[k] for k in ("data_id", "namespace") if isinstance(body.get(k), str)}
        return Submission(metadata, "url", url, "svix" if url else "none")

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        return {
            "job_id": job.id,
            "status": snap.phase.word,
            "source_type": job.kind or "url",
            "namespace": job.metadata.get("namespace", "default"),
            "data_id": job.metadata.get("data_id"),
            "created_at": iso(job.created),
        }

    def _progress(self, job: Job, snap: Snapshot) -> dict[str, int]:
        if snap.phase.word == "running":
            done = int(job.pages * snap.phase_progress)
        else:
            done = job.pages if snap.phase.terminal else 0
        return {"total_pages": job.pages, "processed_pages": done}

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        status = snap.phase.word
        if status == "failed":
            code, message = self.failure(job)
            error = {"code": code, "message": message, "request_id": f"req_{job.number}"}
            return {"job_id": job.id, "status": status, "source_type": job.kind or "url",
                    "error": error}  # fmt: skip
        body: dict[str, Any] = {
            "job_id": job.id,
            "status": status,
            "source_type": job.kind or "url",
            "progress": self._progress(job, snap),
        }
        if status == "done" and link is not None:
            body.update(
                {
                    "result_url": link.url,
                    "result_url_expires_at": iso(link.expires),
                    "result_checksum": {"algorithm": "sha256", "value": link.sha256},
                    "duration_seconds": round(job.duration),
                    "credits_spent": job.pages,
                }
            )
        body["created_at"] = iso(job.created)
        if status == "done":
            body["completed_at"] = iso(snap.entered_at)
        return body

    def list_body(
        self, jobs: list[tuple[Job, Snapshot]], query: Mapping[str, str]
    ) -> dict[str, Any]:
        status = query.get("status")
        words = {p.word for p in (*self.running, self.succeeded, self.failed)}
        if status and status not in words:
            raise QueryError(f"status must be one of {', '.join(sorted(words))}")
        if status:
            jobs = [(job, snap) for job, snap in jobs if snap.phase.word == status]
        page, next_cursor = cursor_page(jobs, query, default=50)
        items = [
            {"job_id": job.id, "status": snap.phase.word, "created_at": iso(job.created)}
            for job, snap in page
        ]
        return {"jobs": items, "next_cursor": next_cursor}

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        if phase.word == "done":
            return {
                "event": "job.completed",
                "job_id": job.id,
                "status": "completed",
                "completed_at": iso(at),
            }
        return {"event": "job.failed", "job_id": job.id, "status": "failed", "failed_at": iso(at)}

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        error: dict[str, Any] = {"code": _CODES[kind], "message": message, "request_id": request_id}
        if retry_after is not None:
            error["details"] = {"retry_after": retry_after}
        return {"success": False, "error": error}
