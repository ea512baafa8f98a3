"""Azure AI Document Intelligence: no webhook; ``:analyze`` answers 202 + ``Operation-Location``.

The operation is polled (``GET .../analyzeResults/{resultId}``) until ``succeeded``, ``failed``
or ``canceled``; every answer carries ``Retry-After``, and a succeeded one ``analyzeResult``
inline. Results are kept 24 hours, then the operation answers 404. The key goes in
``Ocp-Apim-Subscription-Key``. What ``azure-ai-documentintelligence`` 1.0.2 speaks is the spec.

A job's id is ``{modelId}:{resultId}``: both are needed for the polling URL, neither can hold a
``:`` or a ``/``, so the id is one path segment of ``/jobs/{source}/{job_id}``. A batch analysis
(``:analyzeBatch``, polled at ``.../analyzeBatchResults/{resultId}``) is ``{modelId}:batch:
{resultId}``: three parts where a single analysis has two, so neither form can be read as the
other (``azure_batch`` assembles its result from the result container).

A source signs in with its key, or with Microsoft Entra ID (``auth = "entra"``: bearer tokens
from azure-identity, ``azure_auth``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import time
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from receiver import jsontext
from receiver.backoff import retry_after
from receiver.errors import PayloadError, ProviderError
from receiver.models import State
from receiver.providers.azure_auth import (
    AUTHORITY,
    DOCINTEL_SCOPE,
    OptionalSecret,
    TokenSource,
)
from receiver.providers.azure_batch import BlobReader, write_batch
from receiver.providers.azure_fields import document_fields
from receiver.providers.base import JobStatus, Provider, ResultRef
from receiver.providers.jobapi import JobAPI, JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    import httpx

    from receiver.models import Event, Via

API_VERSION = "2024-11-30"
"""The API version ``azure-ai-documentintelligence`` 1.0.2 sends (its default)."""
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{1,63}$")
RESULT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,127}$")
_PATH = re.compile(
    r"^/documentintelligence/documentModels/(?P<model>[^/]+)/"
    r"(?P<kind>analyzeResults|analyzeBatchResults)/(?P<result>[^/]+)/?$"
)
BATCH = "batch"
"""The middle part of a batch analysis's job id, ``{modelId}:batch:{resultId}``."""
RETENTION_HOURS = 24
REMEMBERED = 1000
"""Final answers kept for their Retry-After at most (oldest dropped first)."""


class AzureOptions(BaseModel):
    """``[sources.NAME.azure]``: the API version spoken, the model of bare result ids, how the
    source signs in, and where a batch analysis's results are read."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    api_version: str = API_VERSION
    model_id: str | None = None
    """The model a bare result id (the SDK poller's ``details["operation_id"]``) belongs to."""
    auth: Literal["key", "entra"] = "key"
    """``key``: the source's ``api_key`` in ``Ocp-Apim-Subscription-Key``; ``entra``: Microsoft
    Entra ID bearer tokens (scope ``https://cognitiveservices.azure.com/.default``, needs
    jobhook[azure]) and no ``api_key``, for resources with local (key) auth turned off."""
    tenant_id: str | None = None
    """The Entra tenant of ``client_secret`` or ``certificate`` (and of workload identity)."""
    client_id: str | None = None
    """The application (client) id; with neither secret nor certificate, the user-assigned
    managed identity's client id."""
    client_secret: OptionalSecret = None
    """The application's client secret (``env:NAME``). Unset with ``certificate`` unset too:
    azure-identity's chain of the environment's credentials (``AZURE_CLIENT_SECRET`` or
    ``AZURE_CLIENT_CERTIFICATE_PATH``, workload identity, managed identity)."""
    certificate: OptionalSecret = None
    """The application's certificate: PEM with its private key (``file:/etc/jobhook/app.pem``)."""
    authority: str = AUTHORITY
    """The Entra authority host (https only): a sovereign cloud's, or a private one's."""
    disable_instance_discovery: bool = False
    """Trust ``authority`` without asking Microsoft about it (Azure Stack, private clouds)."""
    result_container_url: OptionalSecret = None
    """The container a batch analysis writes its results to (its ``resultContainerUrl``):
    a SAS URL (``https://ACCOUNT.blob.core.windows.net/CONTAINER?sv=...&sig=...``, read with
    its SAS), or the URL alone (read with Entra ID tokens for ``https://storage.azure.com``).
    Never the Document Intelligence key; only result URLs under it are read."""
    max_result_bytes: int = Field(2 * 1024**3, gt=0)
    """A batch's assembled result's cap: past it the assembly stops (as ``results.max_bytes``)."""

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

    @property
    def signs_in(self) -> bool:
        """The source signs in with Entra ID, so it holds no ``api_key`` (``SourceSettings``)."""
        return self.auth == "entra"

    @field_validator("authority")
    @classmethod
    def _authority(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname or parts.query:
            raise ValueError("an authority is an https URL (https://login.microsoftonline.com)")
        return value.rstrip("/")

    @field_validator("result_container_url")
    @classmethod
    def _container(cls, value: Any) -> Any:
        if value is None:
            return None
        parts = urlsplit(value.reveal())
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError("must be the container's http(s) URL")
        if not parts.path.strip("/"):
            raise ValueError("must name the container (https://ACCOUNT.blob.core.windows.net/C)")
        return value

    @model_validator(mode="after")
    def _credential(self) -> AzureOptions:
        if self.client_secret is not None and self.certificate is not None:
            raise ValueError("client_secret and certificate are two credentials: give one")
        if (self.client_secret or self.certificate) and not (self.tenant_id and self.client_id):
            raise ValueError("a client_secret or certificate needs tenant_id and client_id")
        entra = self.auth == "entra" or (
            self.result_container_url is not None and not self.container_sas
        )
        if entra and not _installed("azure.identity"):
            raise ValueError(
                "Entra ID (auth = 'entra', or a result_container_url without a SAS) needs "
                "jobhook[azure]: uv sync --extra azure"
            )
        return self

    @property
    def container_sas(self) -> bool:
        """Whether the result container is read with its SAS (else with Entra ID tokens)."""
        url = self.result_container_url
        return url is not None and bool(urlsplit(url.reveal()).query)


class AzureJobAPI(JobAPI):
    """Polls an analyze operation; keeps the ``Retry-After`` each answer carries for the job.

    A final answer is remembered until its ``Retry-After`` has passed: confirming a failure the
    poller has just seen asks nothing (the service said not to ask again so soon).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._final: dict[str, tuple[float, JobStatus]] = {}
        provider = self.provider
        assert isinstance(provider, AzureDocIntel)
        self.options = options = provider.options
        self.tokens: TokenSource | None = None
        if options.auth == "entra" or (
            options.result_container_url is not None and not options.container_sas
        ):
            self.tokens = TokenSource(
                source=self.source, client=self._client, tenant_id=options.tenant_id,
                client_id=options.client_id, client_secret=options.client_secret,
                certificate=options.certificate, authority=options.authority,
                disable_instance_discovery=options.disable_instance_discovery,
            )  # fmt: skip

    async def auth(self) -> dict[str, str]:
        """The key's header, or an Entra ID bearer token's."""
        if self.options.auth == "entra":
            assert self.tokens is not None
            return await self.tokens.bearer(DOCINTEL_SCOPE)
        return self.provider.auth_headers(self._api_key.reveal())

    def result_headers(self, url: str) -> dict[str, str]:
        return {}  # results come inline, or from the result container with its own credential

    async def job_body(self, job_id: str) -> Any:
        return await self._body(job_id, urgent=False)

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """A batch's result files, read from the result container, as one JSON document."""
        if ref.assemble != BATCH or not isinstance(ref.inline, dict):
            return await super().write_result(job_id, ref, dest)
        reader = BlobReader(
            source=self.source, client=self._client, limiter=self.limiter,
            container=self.options.result_container_url, tokens=self.tokens,
            count=self._count,
        )  # fmt: skip
        return await write_batch(
            reader, job_id, ref.inline, dest, limit=self.options.max_result_bytes
        )

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
        response = await self._poll(job_id, urgent=urgent)
        body = self._json(response)
        status = self.provider.parse_job(body, source=self.source, job_id=job_id)
        return dataclasses.replace(status, retry_after=retry_after(response.headers))

    async def _body(self, job_id: str, *, urgent: bool) -> Any:
        return self._json(await self._poll(job_id, urgent=urgent))

    async def _poll(self, job_id: str, *, urgent: bool) -> httpx.Response:
        url = self._base + self.provider.job_path(job_id)
        headers = await self.auth()
        try:
            return await self._send("GET", url, job_id=job_id, urgent=urgent, headers=headers)
        except JobNotFoundError as exc:
            raise JobNotFoundError(
                f"{self.source}: analyze operation {job_id!r} not found (Document Intelligence "
                f"keeps results {RETENTION_HOURS} hours)"
            ) from exc

    def _json(self, response: httpx.Response) -> Any:
        try:
            return jsontext.loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProviderError(f"{self.source}: analyze operation answered invalid JSON") from exc


class AzureDocIntel(Provider):
    name = "azure-docintel"
    sdk_loggers = ("azure",)
    status_words = {
        "notStarted": State.QUEUED,
        "running": State.RUNNING,
        "succeeded": State.SUCCEEDED,
        "failed": State.FAILED,
        "canceled": State.CANCELLED,
        # A batch's word in the service's guide; the SDK (and the service) say succeeded.
        "completed": State.SUCCEEDED,
        # A batch's file that was not analysed (it was there already, overwriteExisting false).
        "skipped": State.FAILED,
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

    @classmethod
    def check_source(cls, keys: Mapping[str, object], table: BaseModel | None) -> None:
        """A source signing in with Entra ID (``auth = "entra"``) has no key, and needs none."""
        if getattr(table, "auth", None) != "entra":
            super().check_source(keys, table)
            return
        if keys.get("api_key"):
            raise ValueError('auth = "entra" signs in with Entra ID tokens: remove api_key')
        if not keys.get("api_base_url"):
            raise ValueError(
                f"provider {cls.name!r} needs api_base_url ({cls.required_keys['api_base_url']})"
            )

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
        """``{modelId}:{resultId}`` (a batch: ``{modelId}:batch:{resultId}``) from an
        ``Operation-Location`` URL, those forms themselves, or a bare result id (of a single
        analysis) when the source names its ``model_id``."""
        text = given.strip()
        batch = False
        if "://" in text:
            parts = urlsplit(text)
            found = _PATH.match(parts.path)
            if found is None:
                raise ValueError(
                    "an Operation-Location is {endpoint}/documentintelligence/documentModels/"
                    "{modelId}/analyzeResults/{resultId}?api-version=... (or analyzeBatchResults)"
                )
            model, result = found["model"], found["result"]
            batch = found["kind"] == "analyzeBatchResults"
        elif text.count(":") == 2 and text.split(":")[1] == BATCH:
            model, _, result = text.split(":")
            batch = True
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
        return f"{model}:{BATCH}:{result}" if batch else f"{model}:{result}"

    def job_path(self, job_id: str) -> str:
        parts = job_id.split(":")
        if len(parts) == 3 and parts[1] == BATCH:
            model, kind, result = parts[0], "analyzeBatchResults", parts[2]
        elif len(parts) == 2:
            model, kind, result = parts[0], "analyzeResults", parts[1]
        else:
            raise ProviderError(f"azure-docintel job {job_id!r}: not modelId:resultId")
        return (
            f"/documentintelligence/documentModels/{quote(model, safe='')}/{kind}/"
            f"{quote(result, safe='')}?api-version={self.options.api_version}"
        )

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("status"), str):
            raise ProviderError(f"azure-docintel operation {job_id}: answer has no status")
        status: str = body["status"]
        state = self.canonical(status, source=source, job_id=job_id)
        if job_id.count(":") == 2:
            return self._batch(body, status, state, source=source, job_id=job_id)
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

    def _batch(
        self, body: dict[str, Any], status: str, state: State, *, source: str, job_id: str
    ) -> JobStatus:
        """A batch: the operation's own status, then its files'. Every file failed or skipped:
        failed; some: partial, naming them; a result to assemble when any file succeeded."""
        error = body.get("error")
        if state is not State.SUCCEEDED:
            return JobStatus(state=state, provider_status=status, error=describe(error),
                             error_code=innermost_code(error))  # fmt: skip
        # The SDK reads the counts and details under ``result``; the guide shows them at the top.
        inner = body.get("result")
        result: dict[str, Any] = inner if isinstance(inner, dict) else body
        details = result.get("details")
        files: list[dict[str, Any]] = []
        for item in details if isinstance(details, list) else ():
            if not isinstance(item, dict) or not isinstance(item.get("sourceUrl"), str):
                continue
            said = item.get("status")
            word = said if isinstance(said, str) else "failed"
            url = item.get("resultUrl")
            ok = (
                self.canonical(word, source=source, job_id=job_id) is State.SUCCEEDED
                and isinstance(url, str)
                and bool(url)
            )
            files.append({
                "sourceUrl": _no_query(item["sourceUrl"]),
                "resultUrl": _no_query(url) if isinstance(url, str) else None,
                "status": word, "ok": ok,
                "error": item.get("error") if isinstance(item.get("error"), dict) else None,
            })  # fmt: skip
        bad = [f for f in files if not f["ok"]]
        if files and len(bad) == len(files):
            state = State.FAILED
        elif bad:
            state = State.PARTIAL
        counts = {k: result.get(k) for k in ("succeededCount", "failedCount", "skippedCount")}
        text = None
        if bad:
            text = f"{len(bad)} of {len(files)} files not analysed: " + "; ".join(
                f"{_file_name(f['sourceUrl'])}: {f['status']}"
                + (f" ({describe(f['error'])})" if f["error"] else "")
                for f in bad[:10]
            )
        code = next((innermost_code(f["error"]) for f in bad if f["error"]), None)
        return JobStatus(
            state=state,
            provider_status=status,
            result=ResultRef(inline={"status": status, **counts, "files": files},
                             assemble=BATCH) if len(bad) < len(files) or not files else None,
            error=text,
            error_code=code or ("skipped" if bad else None),
        )  # fmt: skip


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is not there either
        return False


def _no_query(url: str) -> str:
    """A blob URL without its query (a SAS the service echoed is a credential: never kept)."""
    return url.split("?", 1)[0]


def _file_name(url: str) -> str:
    """A source blob as the files of a partial batch are named: its path in the account."""
    return unquote(urlsplit(url).path).lstrip("/") or url


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
