"""LlamaParse (LlamaCloud's parse jobs, ``llama-cloud`` 2.19.0): polled, and told by webhooks.

``GET /api/v2/parse/{id}`` answers ``{job: {id, status, error_message, ...}}``: ``PENDING``,
``RUNNING``, then ``COMPLETED``, ``FAILED`` or ``CANCELLED``. ``expand=`` adds the content
(``markdown``, ``text``, ``items``, ``metadata``); a page that failed is an entry ``{page_number,
success: false, error}`` among the pages, so a ``COMPLETED`` job with such pages is ``partial``
(LlamaCloud's ``parse.partial_success``). The result is that expanded answer, streamed to disk;
one gone after the retention (404/410) is ``result_expired``. Bearer key.

Webhooks are configured per job (``webhook_configurations``): signed with ``LC-Signature`` when
the job set a ``webhook_signing_secret`` (``signature = "llamacloud"``), else unsigned and taken
as hints (``webhook_mode = "direct"`` with ``direct_header``). Either way the body is only a
pointer to the job: its shape is not documented (docs/providers.md says what is assumed), and
the job API says what happened.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, ClassVar

from receiver.errors import PayloadError, ProviderError
from receiver.files import atomic_open
from receiver.models import Event, ResultRef, State
from receiver.providers.assembled import AssemblingJobAPI, JsonSink
from receiver.providers.base import JobStatus, Provider, hinted_job, job_segment, with_query
from receiver.providers.jobapi import JobNotFoundError

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.models import Via
    from receiver.providers.base import ListedJob

RESULT_EXPAND = "markdown,text,items,metadata"
"""What a finished job's result holds: every content expansion (presigned URLs left out)."""
JOB_FIELDS = "data.id|data.job_id|job_id"
"""Where a webhook body may name its job, tried in order (see docs/providers.md)."""
MAX_LISTED_PAGES = 5
"""Failed pages named in a partial job's error line (all of them are in the result)."""


class LlamaParseJobAPI(AssemblingJobAPI):
    """A completed job's pages looked at once (a failed page makes it ``partial``); its
    result streamed from the job endpoint with every content expansion."""

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        status = await super().get_job(job_id, urgent=urgent)
        if status.state is not State.SUCCEEDED:
            return status
        path = with_query(self.provider.job_path(job_id), expand="markdown")
        try:
            answer = await self._get(path, job_id=job_id, urgent=urgent)
        except JobNotFoundError:
            return status  # the content is gone: fetching the result says result_expired
        failed, total = _failed_pages(answer)
        if not failed:
            return status
        named = "; ".join(
            f"page {p['page_number']}: {p['error']}" for p in failed[:MAX_LISTED_PAGES]
        )
        more = len(failed) - MAX_LISTED_PAGES
        error = f"{len(failed)} of {total} pages failed: {named}" + (
            f" (and {more} more)" if more > 0 else ""
        )
        return dataclasses.replace(
            status, state=State.PARTIAL, error=error, error_code="pages_failed"
        )

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """The job endpoint's answer with ``RESULT_EXPAND``, as it comes, streamed to ``dest``."""
        path = with_query(self.provider.job_path(job_id), expand=RESULT_EXPAND)
        with atomic_open(dest) as out:
            sink = JsonSink(out, source=self.source)
            await self.download(path, job_id=job_id, what="result", write=sink.write)
        return sink.sha256, sink.size


class LlamaParse(Provider):
    name: ClassVar[str] = "llamaparse"
    signature_schemes = ("llamacloud",)
    status_words = {
        "PENDING": State.QUEUED,
        "RUNNING": State.RUNNING,
        "COMPLETED": State.SUCCEEDED,
        "FAILED": State.FAILED,
        "CANCELLED": State.CANCELLED,
        "parse.pending": State.QUEUED,
        "parse.running": State.RUNNING,
        "parse.success": State.SUCCEEDED,
        "parse.partial_success": State.PARTIAL,
        "parse.error": State.FAILED,
        "parse.cancelled": State.CANCELLED,
    }
    webhook_has_result = False
    hint_job_field = JOB_FIELDS
    job_api_class = LlamaParseJobAPI
    cannot_resubmit = (
        "llamaparse: the job API does not return the document a job parsed; submit the "
        "document again (POST /api/v2/parse) rather than this job"
    )

    def default_api_base_url(self) -> str | None:
        return "https://api.cloud.llamaindex.ai"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        payload = _decoded(body)
        job_id = hinted_job(payload, JOB_FIELDS)
        if job_id is None:
            raise PayloadError("invalid_payload", "the webhook names no parse job (data.id)")
        word = payload.get("event_type")
        if not isinstance(word, str) or not word:
            raise PayloadError("invalid_payload", "field 'event_type' is missing or not a string")
        return self.webhook_event(
            source=source, job_id=job_id, status=word, via=via, message_id=message_id
        )

    def job_path(self, job_id: str) -> str:
        return f"/api/v2/parse/{job_segment(job_id)}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        job = body.get("job") if isinstance(body, dict) else None
        if not isinstance(job, dict) or not isinstance(job.get("status"), str):
            raise ProviderError(f"llamaparse job {job_id}: answer has no job.status")
        status: str = job["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result = ResultRef(assemble="llamaparse") if state is State.SUCCEEDED else None
        text = job.get("error_message")
        code = job.get("error_code")  # not in the SDK's Job: kept should the API send one
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=text if isinstance(text, str) and text else None,
            error_code=code[:100] if isinstance(code, str) and code else None,
        )

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        return with_query("/api/v2/parse", page_token=cursor, status=status, page_size=100)

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ProviderError("llamaparse job list: answer has no 'items' list")
        jobs: list[ListedJob] = []
        for item in items:
            if isinstance(item, dict):
                job_id, status = item.get("id"), item.get("status")
                if isinstance(job_id, str) and job_id and isinstance(status, str):
                    jobs.append((job_id, status))
        cursor = body.get("next_page_token")
        return jobs, cursor if isinstance(cursor, str) and cursor else None

    def submitted_job_id(self, body: Any) -> str:
        job_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(job_id, str) or not job_id:
            raise ProviderError("llamaparse: the submission's answer has no id")
        return job_id


def _decoded(body: Any) -> dict[str, Any]:
    """The webhook's payload: an object, or (``webhook_output_format = "string"``, the
    default) an object JSON-encoded in a string."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            raise PayloadError("invalid_payload", "the body's string is not JSON") from None
    if not isinstance(body, dict):
        raise PayloadError("invalid_payload", "the body is not a JSON object")
    return body


def _failed_pages(answer: Any) -> tuple[list[dict[str, Any]], int]:
    """The failed page entries of an ``expand=markdown`` answer, and how many pages it has."""
    markdown = answer.get("markdown") if isinstance(answer, dict) else None
    pages = markdown.get("pages") if isinstance(markdown, dict) else None
    if not isinstance(pages, list):
        return [], 0
    failed = [
        {"page_number": p.get("page_number"), "error": str(p.get("error", ""))}
        for p in pages
        if isinstance(p, dict) and p.get("success") is False
    ]
    return failed, len(pages)
