"""Reducto: Svix webhooks (``async.update``) that carry no result; ``GET /job/{id}`` has it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.errors import ProviderError
from receiver.models import Event, Progress, State
from receiver.providers.base import JobStatus, Provider, ResultRef, optional_dict, require_str

if TYPE_CHECKING:
    from receiver.models import Via


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

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        job_id = require_str(body, "job_id")
        status = require_str(body, "status")
        return Event(
            source=source,
            job_id=job_id,
            state=self.canonical(status, source=source, job_id=job_id),
            provider_status=status,
            via=via,
            message_id=message_id,
            metadata=optional_dict(body, "metadata"),
        )

    def job_path(self, job_id: str) -> str:
        return f"/job/{job_id}"

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
        reason = body.get("reason")
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=reason if isinstance(reason, str) else None,
            progress=_progress(progress),
        )


def _progress(value: object) -> Progress | None:
    # Reducto reports a 0..1 fraction, not pages; keep it as per-mille of 1000 "pages".
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Progress(done=round(float(value) * 1000), total=1000)
    return None
