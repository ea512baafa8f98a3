"""Azure AI Document Intelligence: no webhook; ``:analyze`` answers 202 + ``Operation-Location``.

The operation is polled (``GET .../analyzeResults/{resultId}``) until ``succeeded``, ``failed``
or ``canceled``; every answer carries ``Retry-After``, and a succeeded one ``analyzeResult``
inline. Results are kept 24 hours, then the operation answers 404. The key goes in
``Ocp-Apim-Subscription-Key``. What ``azure-ai-documentintelligence`` 1.0.2 speaks is the spec.

A job's id is ``{modelId}:{resultId}``: both are needed for the polling URL, neither can hold a
``:`` or a ``/``, so the id is one path segment of ``/jobs/{source}/{job_id}``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

from receiver import jsontext
from receiver.backoff import retry_after
from receiver.errors import PayloadError, ProviderError
from receiver.models import State
from receiver.providers.azure_fields import document_fields
from receiver.providers.base import JobStatus, Provider, ResultRef
from receiver.providers.jobapi import JobAPI, JobNotFoundError

if TYPE_CHECKING:
    from receiver.models import Event, Via

API_VERSION = "2024-11-30"
"""The API version ``azure-ai-documentintelligence`` 1.0.2 sends (its default)."""
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{1,63}$")
RESULT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$")
_PATH = re.compile(
    r"^/documentintelligence/documentModels/(?P<model>[^/]+)/analyzeResults/(?P<result>[^/]+)/?$"
)
RETENTION_HOURS = 24
REMEMBERED = 1000
"""Final answers kept for their Retry-After at most (oldest dropped first)."""


class AzureOptions(BaseModel):
    """``[sources.NAME.azure]``: the API version spoken and the model of bare result ids."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_version: str = API_VERSION
    model_id: str | None = None
    """The model a bare result id (the SDK poller's ``details["operation_id"]``) belongs to."""

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}(-preview)?", value):
            raise ValueError("an API version is a date such as 2024-11-30")
        return value

    @field_validator("model_id")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        if value is not None and not MODEL_ID.match(value):
            raise ValueError("a model id is 2 to 64 of A-Z a-z 0-9 . _ ~ - (prebuilt-invoice)")
        return value


class AzureJobAPI(JobAPI):
    """Polls an analyze operation; keeps the ``Retry-After`` each answer carries for the job.

    A final answer is remembered until its ``Retry-After`` has passed: confirming a failure the
    poller has just seen asks nothing (the service said not to ask again so soon).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._final: dict[str, tuple[float, JobStatus]] = {}

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        remembered = self._final.pop(job_id, None)
        if remembered is not None and time.monotonic() < remembered[0]:
            return remembered[1]
        status = await self._ask(job_id, urgent=urgent)
        if status.state.terminal and status.retry_after:
            if len(self._final) >= REMEMBERED:
                self._final.pop(next(iter(self._final)))
            self._final[job_id] = (time.monotonic() + status.retry_after, status)
        return status

    async def _ask(self, job_id: str, *, urgent: bool) -> JobStatus:
        provider = self.provider
        url = self._base + provider.job_path(job_id)
        headers = provider.auth_headers(self._api_key.reveal())
        try:
            response = await self._send("GET", url, job_id=job_id, urgent=urgent, headers=headers)
        except JobNotFoundError as exc:
            raise JobNotFoundError(
                f"{self.source}: analyze operation {job_id!r} not found (Document Intelligence "
                f"keeps results {RETENTION_HOURS} hours)"
            ) from exc
        try:
            body = jsontext.loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProviderError(f"{self.source}: analyze operation answered invalid JSON") from exc
        status = provider.parse_job(body, source=self.source, job_id=job_id)
        return dataclasses.replace(status, retry_after=retry_after(response.headers))


class AzureDocIntel(Provider):
    name = "azure-docintel"
    status_words = {
        "notStarted": State.QUEUED,
        "running": State.RUNNING,
        "succeeded": State.SUCCEEDED,
        "failed": State.FAILED,
        "canceled": State.CANCELLED,
    }
    webhooks = False
    auth_header = "Ocp-Apim-Subscription-Key"
    auth_scheme = ""
    job_api_class = AzureJobAPI
    table_name = "azure"
    table_model = AzureOptions
    required_keys = {
        "api_base_url": "the resource's endpoint, https://NAME.cognitiveservices.azure.com",
        "api_key": "its key",
    }
    result_fields = staticmethod(document_fields)
    cannot_resubmit = (
        "azure-docintel: an analyze operation keeps its result, not the document it was given, "
        "so the pipeline that submitted it must submit the document again"
    )

    def __init__(self, options: AzureOptions | None = None) -> None:
        self.options = options or AzureOptions()

    def __repr__(self) -> str:
        return f"AzureDocIntel(api_version={self.options.api_version!r})"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError("no_webhooks", "Azure Document Intelligence sends no webhooks")

    def job_id(self, given: str) -> str:
        """``{modelId}:{resultId}`` from an ``Operation-Location`` URL, that form itself, or a
        bare result id when the source names its ``model_id``."""
        text = given.strip()
        if "://" in text:
            parts = urlsplit(text)
            found = _PATH.match(parts.path)
            if found is None:
                raise ValueError(
                    "an Operation-Location is {endpoint}/documentintelligence/documentModels/"
                    "{modelId}/analyzeResults/{resultId}?api-version=..."
                )
            model, result = found["model"], found["result"]
        elif ":" in text:
            model, _, result = text.partition(":")
        elif self.options.model_id is not None:
            model, result = self.options.model_id, text
        else:
            raise ValueError(
                "give the Operation-Location URL or modelId:resultId (a bare result id needs "
                "model_id in the source's [azure] table)"
            )
        if not MODEL_ID.match(model) or not RESULT_ID.match(result):
            raise ValueError(f"{text[:200]!r} is not a model id and a result id")
        return f"{model}:{result}"

    def job_path(self, job_id: str) -> str:
        model, sep, result = job_id.partition(":")
        if not sep:
            raise ProviderError(f"azure-docintel job {job_id!r}: not modelId:resultId")
        return (
            f"/documentintelligence/documentModels/{quote(model, safe='')}/analyzeResults/"
            f"{quote(result, safe='')}?api-version={self.options.api_version}"
        )

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"azure-docintel operation {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        result: ResultRef | None = None
        if state is State.SUCCEEDED:
            analyzed = body.get("analyzeResult")
            if not isinstance(analyzed, dict):
                raise ProviderError(
                    f"azure-docintel operation {job_id}: succeeded without an analyzeResult"
                )
            result = ResultRef(inline=analyzed)
        error = body.get("error")
        return JobStatus(
            state=state,
            provider_status=status,
            result=result,
            error=describe(error),
            error_code=innermost_code(error),
        )

    def retry_hint(self, body: Any) -> float | None:
        return None


def innermost_code(error: object) -> str | None:
    """The most specific code of ``{code, innererror: {code, innererror...}}``
    (``InvalidContent`` rather than ``InvalidRequest``)."""
    code: str | None = None
    depth = 0
    while isinstance(error, dict) and depth < 8:
        found = error.get("code")
        if isinstance(found, str) and found:
            code = found[:100]
        error = error.get("innererror")
        depth += 1
    return code


def describe(error: object) -> str | None:
    """``code: message``, then the inner errors' ``(code: message)``, on one line."""
    parts: list[str] = []
    depth = 0
    while isinstance(error, dict) and depth < 8:
        words = [str(error[k]) for k in ("code", "message") if isinstance(error.get(k), str)]
        if words:
            parts.append(": ".join(words))
        error = error.get("innererror")
        depth += 1
    if not parts:
        return None
    return parts[0] + "".join(f" ({part})" for part in parts[1:])
