"""Reducto: Svix webhooks (``async.update``) that carry no result; ``GET /job/{id}`` has it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.errors import ProviderError
from receiver.models import Event, Progress, State
from receiver.providers.base import (
    FieldReading,
    JobStatus,
    Provider,
    ResultRef,
    describe_error,
    error_code,
    job_segment,
    number,
    require_str,
    with_query,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from receiver.models import Via
    from receiver.providers.base import ListedJob

LIST_PAGE_SIZE = 100
WORDS = {"high": 0.95, "medium": 0.75, "low": 0.5}
"""Reducto's confidence words as numbers: ``low`` falls under the default 0.80 alert."""


class Reducto(Provider):
    name = "reducto"
    status_words = {
        "Pending": State.QUEUED,
        "Idle": State.QUEUED,
        "InProgress": State.RUNNING,
        "Completing": State.RUNNING,
        "Completed": State.SUCCEEDED,
        "Failed": State.FAILED,
        "Cancelled": State.CANCELLED,
    }
    webhook_has_result = False
    hint_job_field = "job_id"  # async.webhook.mode = "direct": {status, job_id, metadata}
    # The webhook is {status, job_id, metadata}; GET /job/{id} may echo the request as the
    # optional raw_config text (the SDK's EnhancedAsyncJobResponse), but its input is often a
    # reducto:// upload or presigned URL that has expired by the time a job is reprocessed.
    cannot_resubmit = (
        "reducto: the webhook carries no document input and GET /job/{{id}} at most an optional "
        "raw_config whose input (a reducto:// upload or presigned URL) may have expired, so the "
        "pipeline that submitted it must submit the document again"
    )

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        job_id = require_str(body, "job_id")
        status = require_str(body, "status")
        return self.webhook_event(
            source=source, job_id=job_id, status=status, via=via, message_id=message_id,
            metadata=body.get("metadata"),
        )  # fmt: skip

    def job_path(self, job_id: str) -> str:
        return f"/job/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"reducto job {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result: ResultRef | None = None
        envelope = body.get("result")
        if state is State.SUCCEEDED and isinstance(envelope, dict):
            inner = envelope.get("result")
            if isinstance(inner, dict) and inner.get("type") == "url":
                url = inner.get("url")
                if not isinstance(url, str) or not url:
                    raise ProviderError(f"reducto job {job_id}: url result without a url")
                result = ResultRef(url=url)
            else:
                result = ResultRef(inline=envelope)
        progress = body.get("progress")
        # The free-text reason (the guide's field) reads best; the error object (the SDK's
        # ErrorDetail {code, message, name}) carries the code, and the text when no reason came.
        reason, detail = body.get("reason"), body.get("error")
        text = reason if isinstance(reason, str) and reason else describe_error(detail)
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=text,
            progress=_progress(progress),
            error_code=error_code(detail),
        )

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        # GET /jobs has no status filter; raw configs are left out to keep pages small.
        return with_query("/jobs", cursor=cursor, limit=LIST_PAGE_SIZE, exclude_configs="true")

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        if not isinstance(body, dict) or not isinstance(body.get("jobs"), list):
            raise ProviderError("reducto job list: answer has no 'jobs' list")
        jobs = [
            (job["job_id"], job["status"])
            for job in body["jobs"]
            if isinstance(job, dict)
            and isinstance(job.get("job_id"), str)
            and isinstance(job.get("status"), str)
        ]
        cursor = body.get("next_cursor")
        return jobs, cursor if isinstance(cursor, str) and cursor else None

    def result_fields(self, result: dict[str, Any]) -> Iterable[FieldReading]:
        """Each block of ``result.chunks[].blocks[]`` has a ``type`` and a ``confidence`` word
        (``"high"`` / ``"low"`` in its SDK's parse response, ``"medium"`` elsewhere in its API),
        or a number in ``granular_confidence.parse_confidence`` when numeric confidence is on.
        A block type is a field; its confidence is its least confident block's."""
        inner = result.get("result")
        chunks = (inner if isinstance(inner, dict) else result).get("chunks")
        for chunk in chunks if isinstance(chunks, list) else ():
            blocks = chunk.get("blocks") if isinstance(chunk, dict) else None
            for block in blocks if isinstance(blocks, list) else ():
                if isinstance(block, dict) and isinstance(block.get("type"), str):
                    confidence = _block_confidence(block)
                    if confidence is not None:
                        yield block["type"], confidence, None


def _block_confidence(block: dict[str, Any]) -> float | None:
    granular = block.get("granular_confidence")
    if isinstance(granular, dict):
        found = number(granular.get("parse_confidence"))
        if found is not None:
            return found
    word = block.get("confidence")
    return WORDS.get(word.lower()) if isinstance(word, str) else None


def _progress(value: object) -> Progress | None:
    # Reducto reports a 0..1 fraction, not pages; keep it as per-mille of 1000 "pages".
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Progress(done=round(float(value) * 1000), total=1000)
    return None
