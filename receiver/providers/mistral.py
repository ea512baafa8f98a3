"""Mistral OCR at scale (``mistralai`` 3.7.0): batch jobs on ``/v1/ocr``, polled.

``GET /v1/batch/jobs/{id}`` answers a ``BatchJob``: ``QUEUED``, ``RUNNING``, ``SUCCESS``,
``FAILED``, ``TIMEOUT_EXCEEDED``, ``CANCELLATION_REQUESTED`` or ``CANCELLED``, request counts,
``errors`` (``{message, count}``) and, once it has them, ``output_file`` and ``error_file``: ids
in the Files API, fetched with ``GET /v1/files/{id}/content`` (JSON Lines, one line per
request). Both are streamed into one result. A job whose requests partly failed is ``partial``;
``TIMEOUT_EXCEEDED`` is ``failed`` with that word as its code. No webhook exists.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from receiver.errors import PayloadError, ProviderError
from receiver.files import atomic_open
from receiver.models import Event, Progress, ResultRef, State
from receiver.providers.assembled import AssemblingJobAPI, JsonSink
from receiver.providers.base import JobStatus, Provider, job_segment, page_count

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.models import Via

FILES = ("output_file", "error_file")


class MistralJobAPI(AssemblingJobAPI):
    """The batch's output and error files, from the Files API, as one JSON document."""

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """``{"job_id", "output": [line...], "errors": [line...]}``: each JSON Lines file
        streamed in line by line, each line checked to be JSON."""
        spec = ref.inline if isinstance(ref.inline, dict) else {}
        with atomic_open(dest) as out:
            sink = JsonSink(out, source=self.source)
            sink.write(b'{"job_id":')
            sink.value(job_id)
            for key, name in (("output_file", b"output"), ("error_file", b"errors")):
                sink.write(b',"' + name + b'":[')
                file_id = spec.get(key)
                if isinstance(file_id, str) and file_id:
                    first = [True]

                    def line(found: bytes, key: str = key, first: list[bool] = first) -> None:
                        _check_line(found, self.source, key)
                        sink.write(found if first[0] else b"," + found)
                        first[0] = False

                    path = f"/v1/files/{job_segment(file_id)}/content"
                    await self.download_lines(path, job_id=job_id, what=f"{key} {file_id}",
                                              line=line)  # fmt: skip
                sink.write(b"]")
            sink.write(b"}")
        return sink.sha256, sink.size


class MistralBatch(Provider):
    name = "mistral"
    status_words = {
        "QUEUED": State.QUEUED,
        "RUNNING": State.RUNNING,
        "CANCELLATION_REQUESTED": State.RUNNING,
        "SUCCESS": State.SUCCEEDED,
        "FAILED": State.FAILED,
        "TIMEOUT_EXCEEDED": State.FAILED,
        "CANCELLED": State.CANCELLED,
    }
    webhooks = False
    job_api_class = MistralJobAPI
    cannot_resubmit = (
        "mistral: create a new batch job from the same input files "
        "(POST /v1/batch/jobs with input_files) rather than this one"
    )

    def default_api_base_url(self) -> str | None:
        return "https://api.mistral.ai"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError("invalid_payload", "mistral sends no webhooks: its batches are polled")

    def job_path(self, job_id: str) -> str:
        return f"/v1/batch/jobs/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"mistral batch {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        total, failed = (
            page_count(body.get("total_requests")),
            page_count(body.get("failed_requests")),
        )
        done = page_count(body.get("completed_requests"))
        progress = Progress(done, total) if done is not None or total is not None else None
        files = {k: body[k] for k in FILES if isinstance(body.get(k), str) and body[k]}
        result = ResultRef(assemble="mistral", inline=files) if state.terminal and files else None
        error = _errors(body.get("errors"))
        code: str | None = None
        if status == "TIMEOUT_EXCEEDED":
            code, error = status, error or "the batch ran past its timeout_hours"
        elif state is State.SUCCEEDED and failed:
            state, code = State.PARTIAL, "requests_failed"
            error = f"{failed} of {total if total is not None else '?'} requests failed" + (
                f": {error}" if error else ""
            )
        return JobStatus(state=state, provider_status=status, result=result, error=error,
                         progress=progress, error_code=code)  # fmt: skip


def _errors(value: object) -> str | None:
    """``errors: [{message, count}]`` as one line."""
    if not isinstance(value, list):
        return None
    parts = []
    for item in value:
        if isinstance(item, dict) and isinstance(item.get("message"), str):
            count = page_count(item.get("count"))
            parts.append(item["message"] + (f" (x{count})" if count and count > 1 else ""))
    return "; ".join(parts) or None


def _check_line(line: bytes, source: str, key: str) -> None:
    try:
        json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProviderError(f"{source}: a line of the {key} is not JSON") from exc
