"""Knowhere: webhooks say 'completed' where ``GET /v2/jobs/{id}`` says 'done'; results are zips.

API v2 (``/v2/jobs``, what its SDK 2.2.1 speaks) is the default; a source may keep ``v1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.errors import ProviderError
from receiver.models import Event, Progress, State
from receiver.providers.base import (
    JobStatus,
    Provider,
    ResultRef,
    describe_error,
    error_code,
    hex_sha256,
    job_segment,
    number,
    page_count,
    require_str,
    with_query,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from receiver.models import Via
    from receiver.providers.base import ListedJob

API_VERSIONS = ("v2", "v1")


class Knowhere(Provider):
    name = "knowhere"
    api_versions = API_VERSIONS
    status_words = {
        "waiting-file": State.QUEUED,
        "pending": State.QUEUED,
        "converting": State.RUNNING,
        "running": State.RUNNING,
        "done": State.SUCCEEDED,
        "completed": State.SUCCEEDED,
        "failed": State.FAILED,
    }
    webhook_has_result = False
    # GET /v2/jobs/{id} (the SDK's JobResult) keeps source_type and file_name, never the
    # source_url, and a file job needs its bytes uploaded again.
    cannot_resubmit = (
        "knowhere: GET /v2/jobs/{{id}} keeps source_type and file_name but not the source URL "
        "or the file, so the job cannot be submitted again from what the API returns"
    )

    def __init__(self, api_version: str = "v2") -> None:
        if api_version not in API_VERSIONS:
            raise ValueError(f"knowhere api_version must be one of {', '.join(API_VERSIONS)}")
        self.api_version = api_version

    @classmethod
    def from_settings(
        cls, table: BaseModel | None = None, *, api_version: str | None = None
    ) -> Provider:
        return cls(api_version or API_VERSIONS[0])

    def __repr__(self) -> str:
        return f"Knowhere(api_version={self.api_version!r})"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        job_id = require_str(body, "job_id")
        status = body.get("status")
        if not isinstance(status, str) or not status:
            # "job.completed" without a status field still says what happened.
            status = require_str(body, "event").removeprefix("job.")
        return self.webhook_event(
            source=source, job_id=job_id, status=status, via=via, message_id=message_id,
            metadata=body.get("metadata"), error=body.get("error"),
        )  # fmt: skip

    def job_path(self, job_id: str) -> str:
        return f"/{self.api_version}/jobs/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"knowhere job {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result: ResultRef | None = None
        if state is State.SUCCEEDED:
            url = body.get("result_url")
            if not isinstance(url, str) or not url:
                raise ProviderError(f"knowhere job {job_id}: done without a result_url")
            result = ResultRef(url=url, sha256=_checksum(body.get("result_checksum")))
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=describe_error(body.get("error")),
            progress=_progress(body.get("progress")),
            error_code=error_code(body.get("error")),
        )

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        return with_query(f"/{self.api_version}/jobs", cursor=cursor, status=status)

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        # No sample of this answer exists; accept "jobs" or "data" and "job_id" or "id".
        items = body.get("jobs", body.get("data")) if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ProviderError("knowhere job list: answer has no 'jobs' list")
        jobs: list[ListedJob] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            job_id, status = item.get("job_id", item.get("id")), item.get("status")
            if isinstance(job_id, str) and job_id and isinstance(status, str):
                jobs.append((job_id, status))
        cursor = body.get("next_cursor")
        return jobs, cursor if isinstance(cursor, str) and cursor else None

    def retry_hint(self, body: Any) -> float | None:
        error = body.get("error") if isinstance(body, dict) else None
        details = error.get("details") if isinstance(error, dict) else None
        seconds = number(details.get("retry_after")) if isinstance(details, dict) else None
        return seconds if seconds is not None and seconds >= 0 else None


def _progress(value: object) -> Progress | None:
    """``{processed_pages, total_pages}``, or (v2 allows it) a bare 0..1 fraction."""
    fraction = number(value)
    if fraction is not None:
        return Progress(done=round(fraction * 1000), total=1000)
    if not isinstance(value, dict):
        return None
    done, total = page_count(value.get("processed_pages")), page_count(value.get("total_pages"))
    return Progress(done, total) if done is not None or total is not None else None


def _checksum(value: object) -> str | None:
    """``result_checksum``'s hex value when it is a sha256; anything else is not checkable."""
    if not isinstance(value, dict) or str(value.get("algorithm", "")).lower() != "sha256":
        return None
    return hex_sha256(value.get("value"))
