"""AWS Textract: completion by Amazon SNS, status and results by the SigV4-signed ``Get*`` calls.

Textract's asynchronous APIs (``StartDocumentAnalysis``, ``StartDocumentTextDetection``,
``StartExpenseAnalysis``, ``StartLendingAnalysis``) announce a finished job only on the SNS topic
named in the request's ``NotificationChannel``. The notification's ``Message`` is a JSON string
``{JobId, Status, API, JobTag, Timestamp, DocumentLocation}``; the result comes from the matching
``Get*`` call (JSON 1.1: ``POST /`` with ``X-Amz-Target: Textract.GetDocumentAnalysis``), in
pages of at most 1,000 blocks linked by ``NextToken``, for 7 days.

A job id is Textract's ``JobId`` when the job ran the source's ``api`` (``DocumentAnalysis``
unless configured), else ``API:JobId`` (``ExpenseAnalysis:4f1c...``): that is how a poll or a
confirmation knows which ``Get*`` to call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator

from receiver import jsontext
from receiver.errors import ConfigError, PayloadError, ProviderError
from receiver.files import atomic_open
from receiver.models import Event, ResultRef, State
from receiver.providers.base import JobStatus, Provider, require_str
from receiver.providers.jobapi import JobAPI, JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import BinaryIO

    from receiver.models import Via
    from receiver.providers.base import ListedJob, Submission
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret

log = structlog.get_logger(__name__)

ApiName = Literal["DocumentAnalysis", "DocumentTextDetection", "ExpenseAnalysis", "LendingAnalysis"]
APIS: tuple[ApiName, ...] = (
    "DocumentAnalysis",
    "DocumentTextDetection",
    "ExpenseAnalysis",
    "LendingAnalysis",
)
LIST_KEYS: dict[str, str] = {
    "DocumentAnalysis": "Blocks",
    "DocumentTextDetection": "Blocks",
    "ExpenseAnalysis": "ExpenseDocuments",
    "LendingAnalysis": "Results",
}
"""Which list of a ``Get*`` answer grows page by page (the rest repeats on every page)."""
MAX_PAGE_SIZE = 1000
PAGE_RETRIES = 5
"""Throttled answers to one result page waited out (the budget defers) before giving up."""
THROTTLED = frozenset(
    {"ThrottlingException", "ProvisionedThroughputExceededException", "LimitExceededException"}
)
GONE = "InvalidJobIdException"
JSON_11 = "application/x-amz-json-1.1"
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_TEXTRACT", "AWS_ENDPOINT_URL")
"""Where boto3 users point Textract elsewhere (LocalStack, a VPC endpoint), first found wins."""
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$")
_TOPIC = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]{1,20}:[0-9]{12}:[A-Za-z0-9_.-]{1,256}$")


class AwsSettings(BaseModel):
    """``[sources.NAME.aws]``: the region, the SNS topics allowed to speak, and the API used."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    region: str
    topic_arns: tuple[str, ...] = Field(min_length=1)
    """The SNS topics whose deliveries (and subscription confirmations) this source accepts."""
    api: ApiName = "DocumentAnalysis"
    """The ``Get*`` a bare job id is asked with; others are written ``API:JobId``."""
    page_size: int = Field(MAX_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    """``MaxResults`` of each result page (Textract's own maximum, 1,000, by default)."""
    max_message_age_seconds: float = Field(3600.0, gt=0, le=86_400)
    """How old an SNS message's ``Timestamp`` may be: SNS signs a message once and resends it
    unchanged on every retry of its delivery policy, so this covers those retries."""
    extra_ca_bundle: Path | None = None
    """CAs trusted besides the system's for the certificate and subscription hosts (tests,
    private partitions); added, never instead: verification cannot be turned off."""
    extra_sns_hosts: tuple[str, ...] = ()
    """Hosts (``host`` or ``host:port``) accepted for ``SigningCertURL`` and ``SubscribeURL``
    besides ``sns.<region>.amazonaws.com`` (and ``.com.cn``)."""

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not _REGION.match(value):
            raise ValueError(f"{value!r} is not an AWS region name (like 'us-east-1')")
        return value

    @field_validator("topic_arns")
    @classmethod
    def _topics(cls, arns: tuple[str, ...]) -> tuple[str, ...]:
        for arn in arns:
            if not _TOPIC.match(arn):
                raise ValueError(
                    f"{arn!r} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)"
                )
        return arns

    @field_validator("extra_ca_bundle")
    @classmethod
    def _bundle(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a readable file of PEM certificates")
        return value

    @property
    def endpoint(self) -> str:
        """Textract's regional endpoint (``.amazonaws.com.cn`` in the China partition)."""
        suffix = ".cn" if self.region.startswith("cn-") else ""
        return f"https://textract.{self.region}.amazonaws.com{suffix}"


def configured_endpoint(environ: Mapping[str, str]) -> str | None:
    """The Textract endpoint ``environ`` configures, read as boto3 reads it: the service's
    variable, else the global one, neither when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is
    true; ConfigError, naming the variable, for a value that is not an http(s) URL."""
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    for name in ENDPOINT_VARIABLES:
        value = environ.get(name)
        if not value:
            continue
        if not value.startswith(("https://", "http://")):
            raise ConfigError(f"{name} must be an http(s) URL, like https://textract.example")
        return value.rstrip("/")
    return None


def split_job_id(job_id: str, default: str) -> tuple[str, str]:
    """``(api, JobId)`` of a jobhook job id: ``JobId`` asks ``default``, ``API:JobId`` its API."""
    api, colon, bare = job_id.partition(":")
    if not colon:
        return default, job_id
    if api not in APIS:
        raise JobNotFoundError(f"textract job {job_id!r}: {api!r} is not one of {', '.join(APIS)}")
    return api, bare


def api_of(word: object) -> str | None:
    """The API name in an SNS message's ``API`` (``StartDocumentAnalysis``) or a ``Get*``."""
    if not isinstance(word, str):
        return None
    name = word.removeprefix("Start").removeprefix("Get")
    return name if name in APIS else None


class Textract(Provider):
    name = "textract"
    table_name = "aws"
    sdk_loggers = ("botocore", "boto3")
    table_model = AwsSettings
    table_required = True
    job_auth = "sigv4"
    signature_schemes = ("sns",)
    default_signature = "sns"
    status_words = {
        "IN_PROGRESS": State.RUNNING,
        "SUCCEEDED": State.SUCCEEDED,
        "PARTIAL_SUCCESS": State.PARTIAL,
        "FAILED": State.FAILED,
        "ERROR": State.FAILED,
    }
    webhook_has_result = False
    cannot_resubmit = (
        "textract: Get* answers hold no DocumentLocation or features, so jobhook cannot start "
        "the job again; submit it with StartDocumentAnalysis (or the API it ran)"
    )

    def __init__(self, settings: AwsSettings | None = None) -> None:
        self.settings = settings

    def result_fields(self, result: dict[str, Any]) -> list[tuple[str, float, str | None]]:
        return confidence_fields(result)

    def __repr__(self) -> str:
        return f"Textract(region={self.settings.region if self.settings else None!r})"

    def default_api_base_url(self) -> str | None:
        """Unless the source sets ``api_base_url``: the environment's endpoint as boto3 would
        use it (``configured_endpoint``), else the region's."""
        if self.settings is None:
            return None
        return configured_endpoint(os.environ) or self.settings.endpoint

    @property
    def default_api(self) -> str:
        return self.settings.api if self.settings is not None else "DocumentAnalysis"

    def job_id_for(self, api: str | None, job_id: str) -> str:
        """The jobhook job id of Textract job ``job_id`` run by ``api`` (see the module)."""
        if api is None or api == self.default_api:
            return job_id
        return f"{api}:{job_id}"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        """``body`` is the verified SNS envelope; its ``Message`` holds Textract's news."""
        text = require_str(body, "Message")
        try:
            message = jsontext.loads(text)
        except ValueError:
            raise PayloadError(
                "invalid_payload", "the SNS Message is not Textract's JSON"
            ) from None
        bare = require_str(message, "JobId")
        status = require_str(message, "Status")
        api = api_of(message.get("API"))
        job_id = self.job_id_for(api, bare)
        state = self.canonical(status, source=source, job_id=job_id)
        metadata = {
            key: message[key]
            for key in ("JobTag", "API", "DocumentLocation", "Timestamp")
            if message.get(key) is not None
        }
        failed = state is State.FAILED
        return Event(
            source=source,
            job_id=job_id,
            state=state,
            provider_status=status,
            via=via,
            message_id=message_id,
            metadata=metadata,
            error=f"textract reported the job {status}" if failed else None,
            error_code=status if failed else None,
        )

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        if not isinstance(body, dict) or not isinstance(body.get("JobStatus"), str):
            raise ProviderError(f"textract job {job_id}: the Get* answer has no JobStatus")
        status: str = body["JobStatus"]
        state = self.canonical(status, source=source, job_id=job_id)
        api, _ = split_job_id(job_id, self.default_api)
        result = ResultRef(assemble=api) if state in (State.SUCCEEDED, State.PARTIAL) else None
        message = body.get("StatusMessage")
        error = message if isinstance(message, str) and message else None
        code = _warning_code(body.get("Warnings"))
        if state is State.FAILED:
            error = error or "textract reported the job FAILED"
            code = code or status
        return JobStatus(state=state, provider_status=status, result=result, error=error,
                         error_code=code)  # fmt: skip


def _warning_code(warnings: object) -> str | None:
    """The first warning's ``ErrorCode`` (a PARTIAL_SUCCESS says which pages failed, and why)."""
    if isinstance(warnings, list):
        for warning in warnings:
            code = warning.get("ErrorCode") if isinstance(warning, dict) else None
            if isinstance(code, str) and code:
                return code[:100]
    return None


class ThrottledError(ProviderError):
    """Textract throttled the call (its 429): the budget is deferred; try again later."""


class Signer:
    """SigV4 for Textract with botocore's signer and the standard AWS credential chain."""

    def __init__(self, source: str, region: str) -> None:
        try:
            from botocore.session import get_session
        except ImportError:
            raise ConfigError(
                f"sources.{source}: provider 'textract' needs the 'aws' extra (botocore): "
                "uv sync --extra aws"
            ) from None
        credentials = get_session().get_credentials()
        if credentials is None:
            raise ConfigError(
                f"sources.{source}: no AWS credentials found (AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, web identity or an instance role)"
            )
        self._credentials = credentials
        self.region = region

    def __repr__(self) -> str:
        return f"Signer(region={self.region!r})"

    async def headers(self, url: str, target: str, body: bytes) -> dict[str, str]:
        """The signed request's headers; credentials are refreshed (on a thread) as botocore
        does when they are about to expire."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
        request = AWSRequest(
            method="POST",
            url=url,
            data=body,
            headers={"Content-Type": JSON_11, "X-Amz-Target": f"Textract.{target}"},
        )
        SigV4Auth(frozen, "textract", self.region).add_auth(request)
        return {name: str(value) for name, value in request.headers.items()}


class TextractJobAPI(JobAPI):
    """Textract's ``Get*`` calls, signed, within the source's budget; results assembled."""

    def __init__(
        self,
        *,
        source: str,
        provider: Provider,
        base_url: str,
        api_key: Secret,
        client: httpx.AsyncClient,
        limiter: RateLimiter,
    ) -> None:
        super().__init__(source=source, provider=provider, base_url=base_url, api_key=api_key,
                         client=client, limiter=limiter)  # fmt: skip
        if not isinstance(provider, Textract) or provider.settings is None:
            raise ConfigError(f"sources.{source}: provider 'textract' needs a [sources.{source}"
                              ".aws] table")  # fmt: skip
        self.textract = provider
        self.settings = provider.settings
        self.signer = Signer(source, self.settings.region)
        self._url = self._base + "/"

    def __repr__(self) -> str:
        return f"TextractJobAPI(source={self.source!r}, base_url={self._base!r})"

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        # One result on the page: the status is all a poll or a confirmation needs.
        body = await self.job_body(job_id, urgent=urgent, max_results=1)
        return self.provider.parse_job(body, source=self.source, job_id=job_id)

    async def job_body(self, job_id: str, *, urgent: bool = False, max_results: int = 1) -> Any:
        api, bare = split_job_id(job_id, self.textract.default_api)
        payload = {"JobId": bare, "MaxResults": max_results}
        return await self.call(f"Get{api}", payload, job_id=job_id, urgent=urgent)

    async def list_jobs(
        self, *, cursor: str | None = None, status: str | None = None
    ) -> tuple[list[ListedJob], str | None] | None:
        return None  # Textract has no list of jobs

    async def submit(self, submission: Submission) -> str:
        raise ProviderError(self.textract.cannot_resubmit or "textract: cannot submit")

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """Every ``NextToken`` page written to ``dest`` as one ``Get*`` answer (see
        ``PageWriter``); its sha256 and size. ProviderError (throttled: with retry_after)
        leaves ``dest`` as it was."""
        api, bare = split_job_id(job_id, ref.assemble or self.textract.default_api)
        target = f"Get{api}"
        token: str | None = None
        with atomic_open(dest) as fh:
            writer = PageWriter(fh, LIST_KEYS[api])
            while True:
                payload: dict[str, Any] = {"JobId": bare, "MaxResults": self.settings.page_size}
                if token is not None:
                    payload["NextToken"] = token
                page = await self._page(target, payload, job_id)
                if not isinstance(page, dict):
                    raise ProviderError(f"{self.source}: {target} answered no object")
                await asyncio.to_thread(writer.add, page)
                following = page.get("NextToken")
                if not isinstance(following, str) or not following:
                    break
                if following == token:
                    raise ProviderError(f"{self.source}: {target} repeated its NextToken")
                token = following
            await asyncio.to_thread(writer.finish)
        log.info("textract_result_assembled", source=self.source, job_id=job_id,
                 pages=writer.pages, items=writer.items, bytes=writer.size)  # fmt: skip
        return writer.sha256.hexdigest(), writer.size

    async def _page(self, target: str, payload: dict[str, Any], job_id: str) -> Any:
        """One result page; a throttled answer is waited out within the budget rather than
        starting the whole result again."""
        for attempt in range(PAGE_RETRIES + 1):
            try:
                return await self.call(target, payload, job_id=job_id, urgent=True)
            except ThrottledError:
                if attempt == PAGE_RETRIES:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def call(
        self, target: str, payload: dict[str, Any], *, job_id: str | None, urgent: bool = False
    ) -> Any:
        """One JSON 1.1 call: the answer's JSON, or the error translated (see ``JobAPI``)."""
        body = json.dumps(payload, separators=(",", ":")).encode()
        await self.limiter.acquire(urgent=urgent)
        headers = await self.signer.headers(self._url, target, body)
        try:
            response = await self._client.post(self._url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            self._count("timeout")
            raise ProviderError(f"{self.source}: {target} timed out") from exc
        except httpx.TransportError as exc:
            self._count("error")
            raise ProviderError(
                f"{self.source}: {target} unreachable: {type(exc).__name__}"
            ) from exc
        self._count(str(response.status_code))
        self.limiter.observe(response.headers)
        answer = _json(response)
        if response.status_code < 300 and answer is not None:
            return answer
        kind = error_type(answer)
        if kind in THROTTLED:
            # A throttled call is Textract's 429: the budget waits, the work comes back later.
            wait = self.limiter.interval * 2
            self.limiter.defer(wait)
            raise ThrottledError(f"{self.source}: {target} answered {kind}", retry_after=wait)
        if kind == GONE and job_id is not None:
            raise JobNotFoundError(
                f"{self.source}: textract no longer knows job {job_id!r} ({kind}; results are "
                "kept 7 days)"
            )
        if response.status_code >= 500:
            raise ProviderError(f"{self.source}: {target} answered {response.status_code} {kind}")
        raise ProviderError(f"{self.source}: {target} answered {response.status_code} {kind}")


Textract.job_api_class = TextractJobAPI


def error_type(answer: object) -> str:
    """The exception's name in an AWS JSON error (``com.amazonaws.textract#InvalidJobId...``)."""
    kind = answer.get("__type") if isinstance(answer, dict) else None
    if not isinstance(kind, str) or not kind:
        return "UnknownError"
    return kind.rsplit("#", 1)[-1].split(":", 1)[0]


def _json(response: httpx.Response) -> Any:
    try:
        return jsontext.loads(response.content)
    except ValueError:
        return None


class PageWriter:
    """Writes ``Get*`` pages as one answer: every page's ``key`` list concatenated, the other
    fields of the first page, ``NextToken`` removed, ``Warnings`` of all pages (each once)
    and ``ResponsePages``: the count of pages fetched. One page is held at a time."""

    def __init__(self, fh: BinaryIO, key: str) -> None:
        self._fh = fh
        self.key = key
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.pages = 0
        self.items = 0
        self._head: dict[str, Any] = {}
        self._warnings: list[Any] = []

    def _write(self, data: bytes) -> None:
        self._fh.write(data)
        self.sha256.update(data)
        self.size += len(data)

    def add(self, page: dict[str, Any]) -> None:
        if self.pages == 0:
            self._head = {k: v for k, v in page.items()
                          if k not in (self.key, "NextToken", "Warnings")}  # fmt: skip
            self._write(b"{" + json.dumps(self.key).encode() + b":[")
        self.pages += 1
        items = page.get(self.key)
        for item in items if isinstance(items, list) else ():
            self._write((b"," if self.items else b"") + _dumps(item))
            self.items += 1
        warnings = page.get("Warnings")
        for warning in warnings if isinstance(warnings, list) else ():
            if warning not in self._warnings:
                self._warnings.append(warning)

    def finish(self) -> None:
        tail = {**self._head, "Warnings": self._warnings, "ResponsePages": self.pages}
        self._write(b"]," + _dumps(tail)[1:])


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def confidence_fields(result: dict[str, Any]) -> list[tuple[str, float, str | None]]:
    """Textract's own per-field confidence (0..100) as ``(name, 0..1, value)``: a form's keys
    (KEY_VALUE_SET), an expense's summary fields, a lending document's fields."""
    found: list[tuple[str, float, str | None]] = []
    blocks = result.get("Blocks")
    if isinstance(blocks, list):
        found.extend(_key_values(blocks))
    for document in _list(result.get("ExpenseDocuments")):
        for field in _list(document.get("SummaryFields")):
            found.extend(_detected(field, "ValueDetection", "LabelDetection"))
    for page in _list(result.get("Results")):
        for extraction in _list(page.get("Extractions")):
            lending = extraction.get("LendingDocument")
            fields = lending.get("LendingFields") if isinstance(lending, dict) else None
            for field in _list(fields):
                for detection in _list(field.get("ValueDetections")):
                    found.extend(_detected({"Type": field.get("Type"), "V": detection}, "V"))
    return found


def _list(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _detected(
    field: dict[str, Any], value_key: str, label_key: str | None = None
) -> list[tuple[str, float, str | None]]:
    kind = field.get("Type")
    name = kind.get("Text") if isinstance(kind, dict) else kind
    label = field.get(label_key) if label_key else None
    if isinstance(label, dict) and isinstance(label.get("Text"), str) and label["Text"]:
        name = name if name not in (None, "", "OTHER") else label["Text"]
    detection = field.get(value_key)
    if not isinstance(name, str) or not name or not isinstance(detection, dict):
        return []
    confidence = _percent(detection.get("Confidence"))
    if confidence is None:
        return []
    text = detection.get("Text")
    return [(name, confidence, text if isinstance(text, str) else None)]


def _percent(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100:
        return round(float(value) / 100.0, 6)
    return None


def _key_values(blocks: list[Any]) -> list[tuple[str, float, str | None]]:
    by_id = {b["Id"]: b for b in blocks if isinstance(b, dict) and isinstance(b.get("Id"), str)}
    words: Callable[[dict[str, Any]], str] = lambda block: " ".join(  # noqa: E731
        by_id[i]["Text"]
        for i in _related(block, "CHILD")
        if i in by_id and isinstance(by_id[i].get("Text"), str)
    )
    found = []
    for block in by_id.values():
        kinds = block.get("EntityTypes")
        if block.get("BlockType") != "KEY_VALUE_SET" or not isinstance(kinds, list):
            continue
        if "KEY" not in kinds:
            continue
        name = words(block).strip().rstrip(":").strip()
        key_confidence = _percent(block.get("Confidence"))
        if not name or key_confidence is None:
            continue
        values = [by_id[i] for i in _related(block, "VALUE") if i in by_id]
        text = " ".join(words(v) for v in values).strip() or None
        confidences = [c for v in values if (c := _percent(v.get("Confidence"))) is not None]
        found.append((name, min([key_confidence, *confidences]), text))
    return found


def _related(block: dict[str, Any], kind: str) -> list[str]:
    ids: list[str] = []
    for relation in _list(block.get("Relationships")):
        if relation.get("Type") == kind and isinstance(relation.get("Ids"), list):
            ids.extend(i for i in relation["Ids"] if isinstance(i, str))
    return ids
