"""Any JSON API, read through configured JSON pointers and a status-word table: configuration only.

Pointers that are not configured, or that point at nothing, simply yield nothing; only the
webhook's job id and status, and the job API's status, are required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from receiver.errors import ConfigError, PayloadError, ProviderError
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
)
from receiver.providers.mapping import GenericSettings
from receiver.providers.pointer import MISSING, Pointer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from receiver.models import Via


class Generic(Provider):
    name: ClassVar[str] = "generic"
    signature_schemes = ("docurift", "docextract", "llamacloud")
    table_name = "generic"
    table_model = GenericSettings
    table_required = True

    def __init__(self, settings: GenericSettings) -> None:
        self.settings = settings
        self.status_words = dict(settings.status_words)
        self.webhook_has_result = settings.webhook_has_result
        self.auth_header = settings.auth_header
        scheme = settings.auth_scheme.strip()
        self.auth_scheme = f"{scheme} " if scheme else ""
        self._pointers: dict[str, Pointer | None] = {
            key: Pointer.parse(text) if text is not None else None
            for key, text in (
                ("webhook_job_id", settings.webhook_job_id),
                ("webhook_status", settings.webhook_status),
                ("webhook_metadata", settings.webhook_metadata),
                ("webhook_error", settings.webhook_error),
                ("job_status", settings.job_status),
                ("result", settings.result),
                ("result_url", settings.result_url),
                ("result_sha256", settings.result_sha256),
                ("error", settings.error),
                ("progress_done", settings.progress_done),
                ("progress_total", settings.progress_total),
                ("retry_after", settings.retry_after),
            )
        }

    @classmethod
    def from_settings(
        cls, table: BaseModel | None = None, *, api_version: str | None = None
    ) -> Provider:
        if table is None:
            raise ConfigError("provider 'generic' needs a [sources.NAME.generic] table")
        return super().from_settings(table, api_version=api_version)

    def __repr__(self) -> str:
        return f"Generic(job_path={self.settings.job_path!r})"

    def _get(self, key: str, body: Any) -> Any:
        pointer = self._pointers[key]
        return MISSING if pointer is None else pointer.resolve(body)

    def _word(self, key: str, body: Any) -> str | None:
        value = self._get(key, body)
        # Numbers are status words too for some APIs (0 = queued ...); keep them as text.
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        return str(value) if value != "" else None

    def _required(self, key: str, body: Any) -> str:
        word = self._word(key, body)
        if word is None:
            pointer = self._pointers[key]
            raise PayloadError("invalid_payload", f"nothing usable at {key} {str(pointer)!r}")
        return word

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        job_id = self._required("webhook_job_id", body)
        status = self._required("webhook_status", body)
        return self.webhook_event(
            source=source, job_id=job_id, status=status, via=via, message_id=message_id,
            metadata=self._get("webhook_metadata", body), error=self._get("webhook_error", body),
        )  # fmt: skip

    def job_path(self, job_id: str) -> str:
        return self.settings.job_path.format(job_id=job_segment(job_id))

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        status = self._word("job_status", body)
        if status is None:
            raise ProviderError(f"generic job {job_id}: nothing usable at the job_status pointer")
        state = self.canonical(status, source=source, job_id=job_id)
        result: ResultRef | None = None
        if state in (State.SUCCEEDED, State.PARTIAL):
            url = self._get("result_url", body)
            inline = self._get("result", body)
            if isinstance(url, str) and url:
                result = ResultRef(url=url, sha256=hex_sha256(self._get("result_sha256", body)))
            elif inline is not MISSING and inline is not None:
                result = ResultRef(inline=inline)
        done = page_count(self._get("progress_done", body))
        total = page_count(self._get("progress_total", body))
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=describe_error(self._get("error", body)),
            error_code=error_code(self._get("error", body)),
            progress=Progress(done, total) if done is not None or total is not None else None,
        )

    def retry_hint(self, body: Any) -> float | None:
        seconds = number(self._get("retry_after", body))
        return seconds if seconds is not None and seconds >= 0 else None
