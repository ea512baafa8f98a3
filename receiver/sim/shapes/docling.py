"""Docling Serve: async convert tasks, long-polled status, unsigned progress callbacks, and
results served once by the API itself and removed a few minutes after their first fetch.

Bodies follow docling-serve's models (``TaskStatusResponse``, ``ConvertDocumentResponse``) and
docling's (``ConversionStatus``, ``CallbackSpec``, ``ProgressCallbackRequest``); every call
carries ``X-Api-Key``; errors are FastAPI's ``{"detail": ...}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.sim.jobs import Phase
from receiver.sim.shapes.base import QueryError, Shape, Submission, json_object, webhook_url

if TYPE_CHECKING:
    from collections.abc import Iterator

    from receiver.sim.jobs import Job, Snapshot
    from receiver.sim.shapes.base import ErrorKind, ResultLink

RESULT_REMOVAL = 300.0
"""docling-serve's ``result_removal_delay``: seconds from a result's first fetch to its removal."""
_FILLER = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 64


class Docling(Shape):
    name = "docling"
    key_header = "x-api-key"
    bearer = False
    default_rpm = 600.0
    results = ("inline",)
    job_route = "/v1/status/poll/{job_id}"
    submit_routes = ("/v1/convert/source/async",)
    result_route = "/v1/result/{job_id}"
    result_removal = RESULT_REMOVAL
    long_poll = True
    not_found = "Task not found."
    webhook_on_running = True
    running = (Phase("pending", "queued", 0.0), Phase("started", "running", 0.1))
    succeeded = Phase("success", "succeeded", 1.0)
    failed = Phase("failure", "failed", 1.0)
    failures = {
        "conversion_error": "Conversion failed: the document could not be parsed",
        "timeout": "Conversion did not finish within document_timeout",
    }

    def new_id(self, rng: Any) -> str:
        b = rng.getrandbits(128).to_bytes(16, "big").hex()
        return f"{b[:8]}-{b[8:12]}-{b[12:16]}-{b[16:20]}-{b[20:]}"

    def read_submission(self, path: str, body: Any) -> Submission:
        # ConvertSourcesRequest: sources [{kind: "http", url}] (or the older http_sources),
        # options, target, callbacks [{url, headers, ca_cert}].
        body = json_object(body)
        sources = body.get("sources") or body.get("http_sources")
        if not isinstance(sources, list) or not sources:
            raise QueryError("sources: give at least one source")
        first = json_object(sources[0], "sources[0]")
        url = first.get("url")
        if not isinstance(url, str) or not url:
            raise QueryError("sources[0].url is required (the simulator takes http sources)")
        callbacks = body.get("callbacks") or []
        if not isinstance(callbacks, list):
            raise QueryError("callbacks must be a list")
        hook, headers = None, {}
        if callbacks:
            spec = json_object(callbacks[0], "callbacks[0]")
            hook = webhook_url(spec.get("url"), "callbacks[0].url")
            given = spec.get("headers") or {}
            if not isinstance(given, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in given.items()
            ):
                raise QueryError("callbacks[0].headers must map names to strings")
            headers = dict(given)
        return Submission({}, "convert", hook, "direct" if hook else "none", url, headers)

    def _status(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        word = snap.phase.word
        done = 1 if snap.phase.terminal else 0
        succeeded = 1 if word == "success" else 0
        body: dict[str, Any] = {
            "task_id": job.id,
            "task_type": "convert",
            "task_status": word,
            "task_position": 0 if word == "pending" else None,
            "task_meta": {"num_docs": 1, "num_processed": done, "num_succeeded": succeeded,
                          "num_partially_succeeded": 0, "num_failed": done - succeeded},
            "error_message": self.failure(job)[1] if word == "failure" else None,
        }  # fmt: skip
        return body

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        return self._status(job, snap)

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        return self._status(job, snap)

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        if not phase.terminal:
            return {"task_id": job.id, "progress": {"kind": "set_num_docs", "num_docs": 1}}
        ok = phase.word == "success"
        doc = {"source": job.document or "document.pdf", "status": phase.word,
               "error": None if ok else self.failure(job)[1]}  # fmt: skip
        progress = {"kind": "update_processed", "num_processed": 1,
                    "num_succeeded": int(ok), "num_partially_succeeded": 0,
                    "num_failed": int(not ok), "docs": [doc]}  # fmt: skip
        return {"task_id": job.id, "progress": progress}

    def result_chunks(self, job: Job, size: int) -> Iterator[bytes]:
        # ConvertDocumentResponse, its Markdown padded out to about ``size`` bytes.
        head = b'{"document":{"filename":"document.pdf","md_content":"# Simulated result\\n'
        tail = (b'"},"status":"success","errors":[],"processing_time":%.3f,"timings":{}}'
                % job.duration)  # fmt: skip
        left = max(size - len(head) - len(tail), 0)
        yield head
        while left > 0:
            piece = _FILLER[: min(left, len(_FILLER))]
            left -= len(piece)
            yield piece
        yield tail

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        return {"detail": message}
