"""LandingAI ADE (``landingai-ade`` 1.18.1): parse and extract jobs, on either of its job APIs.

``v1`` (``client.parse_jobs``/``client.extract_jobs``): ``GET /v1/ade/{parse|extract}/jobs/{id}``
on ``https://api.va.landing.ai`` answers ``{job_id, status, progress, received_at, data?,
output_url?, failure_reason?, metadata?}``. ``v2`` (``client.v2.parse_jobs``/``extract_jobs``):
``GET /v2/{parse|extract}/jobs/{id}`` on ``https://api.ade.landing.ai`` answers an envelope the
SDK normalises into one ``Job``: the result under ``result`` (older envelopes: ``data``), the
error as ``error {code, message}`` (older ones: ``failure_reason``), ``output_url`` and, when
the result went to ``output_save_url``, its ``metadata`` receipt at the top. Job ids are opaque
strings in both, so which API a source speaks is its setting (``api_version``), never a guess
from the id. Every envelope form is read whichever version is set: v1 answers hold none of the
v2 keys.

The status is ``pending``, ``processing``, ``completed``, ``failed`` or ``cancelled``. A
finished job's result is inline, or at ``output_url`` (v1: larger than 1 MB; both: when the
submission gave ``output_save_url``, as zero data retention does). A completed parse with
``metadata.failed_pages`` (inline: ``result.metadata.failed_pages``) is partial. Results last
24 hours; under zero data retention the URL works once, so such a result is marked single-use.

LandingAI's webhooks (set up in its console) are signed, but the scheme is not in its public
docs or SDK: jobhook does not accept them, and polls these jobs from the start instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from receiver.errors import PayloadError, ProviderError
from receiver.models import Event, Progress, ResultRef, State
from receiver.providers.base import (
    JobStatus,
    Provider,
    describe_error,
    error_code,
    job_segment,
    number,
)

if TYPE_CHECKING:
    from receiver.models import Via


GONE = "the job's result is no longer held (kept 24 h; once under zero data retention)"
HOSTS = {"v1": "https://api.va.landing.ai", "v2": "https://api.ade.landing.ai"}
"""Each job API's production host (the SDK's ``base_url`` and ``v2_base_url``)."""


class LandingAIOptions(BaseModel):
    """``[sources.NAME.landingai]``: which jobs the source tracks, on which of LandingAI's job
    APIs, and the data retention."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    jobs: Literal["parse", "extract"] = "parse"
    """The job kind the pipeline registers here (``client.parse_jobs`` or
    ``client.extract_jobs``, or their ``client.v2`` twins); a source per kind."""
    api_version: Literal["v1", "v2"] = "v1"
    """The job API the pipeline submits to: ``v1`` (``client.parse_jobs``, ``/v1/ade/...`` on
    api.va.landing.ai) or ``v2`` (``client.v2.parse_jobs``, ``/v2/...`` on api.ade.landing.ai,
    the default ``api_base_url`` then); job ids do not say which, so a source per version."""
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
        "landingai: GET .../{{kind}}/jobs/{{id}} does not return the document, so the job "
        "cannot be submitted again from what the API returns"
    )

    def __init__(self, options: LandingAIOptions | None = None) -> None:
        self.options = options or LandingAIOptions()

    def __repr__(self) -> str:
        return f"LandingAI(jobs={self.options.jobs!r}, api_version={self.options.api_version!r})"

    def default_api_base_url(self) -> str | None:
        return HOSTS[self.options.api_version]

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError(
            "invalid_payload",
            "landingai webhooks are not accepted (their signing scheme is not published): "
            "its jobs are polled",
        )

    def job_path(self, job_id: str) -> str:
        if self.options.api_version == "v2":
            return f"/v2/{self.options.jobs}/jobs/{job_segment(job_id)}"
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
        error, code = _error(body)
        result: ResultRef | None = None
        if state is State.SUCCEEDED:
            payload = _payload(body)
            result = _result(body, payload, self.options.zero_data_retention)
            if result is None:
                # Past its 24 hours, or already fetched under zero data retention.
                error, code = GONE, "result_expired"
            failed = _failed_pages(payload, body.get("metadata"))
            if failed:
                state, code = State.PARTIAL, "pages_failed"
                error = f"pages {', '.join(map(str, failed))} failed to parse"
        return JobStatus(state=state, provider_status=status, result=result, error=error,
                         progress=progress, error_code=code)  # fmt: skip


def _payload(body: dict[str, Any]) -> Any:
    """The inline result: ``result`` (v2), else ``data`` (v1, and older v2 envelopes)."""
    payload = body.get("result")
    return body.get("data") if payload is None else payload


def _error(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The error's text and code: ``error {code, message}`` (v2), else ``failure_reason``."""
    found = body.get("error")
    if isinstance(found, dict) and found:
        return describe_error(found), error_code(found)
    reason = body.get("failure_reason")
    return (reason if isinstance(reason, str) and reason else None), None


def _result(body: dict[str, Any], payload: Any, single_use: bool) -> ResultRef | None:
    url = body.get("output_url")
    if isinstance(url, str) and url:
        return ResultRef(url=url, single_use=single_use)
    if payload is not None:
        return ResultRef(inline=payload)
    return None


def _failed_pages(payload: object, metadata: object) -> list[int]:
    """The pages a completed parse could not read (``metadata.failed_pages``, at the top or
    in the result)."""
    inner = payload.get("metadata") if isinstance(payload, dict) else None
    for holder in (metadata, inner):
        pages = holder.get("failed_pages") if isinstance(holder, dict) else None
        if isinstance(pages, list) and pages:
            return [p for p in pages if isinstance(p, int) and not isinstance(p, bool)]
    return []
