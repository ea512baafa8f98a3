"""LandingAI ADE (``landingai-ade`` 1.18.1): parse and extract jobs.

``GET /v1/ade/parse/jobs/{id}`` (or ``/v1/ade/extract/jobs/{id}``) answers ``{job_id, status,
progress, received_at, data?, output_url?, failure_reason?, metadata?}`` with the status
``pending``, ``processing``, ``completed``, ``failed`` or ``cancelled``. A finished job's result
is ``data`` inline, or at ``output_url`` when it is larger than 1 MB or the organisation keeps
no data (zero data retention, ``output_save_url``). Results last 24 hours; under zero data
retention the URL works once, so such a result is marked single-use.

LandingAI's webhooks (set up in its console) are signed, but the scheme is not in its public
docs or SDK: jobhook does not accept them, and polls these jobs from the start instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from receiver.errors import PayloadError, ProviderError
from receiver.models import Event, Progress, ResultRef, State
from receiver.providers.base import JobStatus, Provider, job_segment, number

if TYPE_CHECKING:
    from receiver.models import Via


GONE = "the job's result is no longer held (kept 24 h; once under zero data retention)"


class LandingAIOptions(BaseModel):
    """``[sources.NAME.landingai]``: which jobs the source tracks, and the data retention."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    jobs: Literal["parse", "extract"] = "parse"
    """The job kind the pipeline registers here (``client.parse_jobs`` or
    ``client.extract_jobs``); a source per kind."""
    zero_data_retention: bool = False
    """The organisation uses zero data retention: every result URL works once."""


class LandingAI(Provider):
    name = "landingai"
    status_words = {
        "pending": State.QUEUED,
        "processing": State.RUNNING,
        "completed": State.SUCCEEDED,
        "failed": State.FAILED,
        "cancelled": State.CANCELLED,
    }
    table_name = "landingai"
    table_model = LandingAIOptions
    webhooks = False
    cannot_resubmit = (
        "landingai: GET /v1/ade/{{kind}}/jobs/{{id}} does not return the document, so the job "
        "cannot be submitted again from what the API returns"
    )

    def __init__(self, options: LandingAIOptions | None = None) -> None:
        self.options = options or LandingAIOptions()

    def __repr__(self) -> str:
        return f"LandingAI(jobs={self.options.jobs!r})"

    def default_api_base_url(self) -> str | None:
        return "https://api.va.landing.ai"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError(
            "invalid_payload",
            "landingai webhooks are not accepted (their signing scheme is not published): "
            "its jobs are polled",
        )

    def job_path(self, job_id: str) -> str:
        return f"/v1/ade/{self.options.jobs}/jobs/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"landingai job {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        fraction = number(body.get("progress"))
        progress = None
        if fraction is not None and 0 <= fraction <= 1:
            progress = Progress(done=round(fraction * 1000), total=1000)
        reason = body.get("failure_reason")
        error = reason if isinstance(reason, str) and reason else None
        result: ResultRef | None = None
        code: str | None = None
        if state is State.SUCCEEDED:
            result = _result(body, self.options.zero_data_retention)
            if result is None:
                # Past its 24 hours, or already fetched under zero data retention.
                error, code = GONE, "result_expired"
            failed = _failed_pages(body.get("data"), body.get("metadata"))
            if failed:
                state, code = State.PARTIAL, "pages_failed"
                error = f"pages {', '.join(map(str, failed))} failed to parse"
        return JobStatus(state=state, provider_status=status, result=result, error=error,
                         progress=progress, error_code=code)  # fmt: skip


def _result(body: dict[str, Any], single_use: bool) -> ResultRef | None:
    url = body.get("output_url")
    if isinstance(url, str) and url:
        return ResultRef(url=url, single_use=single_use)
    if body.get("data") is not None:
        return ResultRef(inline=body["data"])
    return None


def _failed_pages(data: object, metadata: object) -> list[int]:
    """The pages a completed parse could not read (``metadata.failed_pages``)."""
    for holder in (metadata, data.get("metadata") if isinstance(data, dict) else None):
        pages = holder.get("failed_pages") if isinstance(holder, dict) else None
        if isinstance(pages, list) and pages:
            return [p for p in pages if isinstance(p, int) and not isinstance(p, bool)]
    return []
