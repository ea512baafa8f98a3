"""The provider contract: what an adapter implements so jobhook can follow its jobs.

This module is the public, typed API a provider — built in or third-party — is written
against (docs/write-a-provider.md walks through one). An adapter is a subclass of ``Provider``
found by the name a source's ``provider`` key gives (``receiver.providers.provider_class``):

- ``name`` and ``status_words``: its status words and the canonical ``State`` of each; an
  unknown word is kept beside ``queued`` (``canonical``), never an error.
- ``parse_webhook``: a verified webhook (or callback) body to an ``Event``; ``PayloadError``
  when the body names no job. Verification is not the adapter's: the source's ``signature``
  picks a scheme of ``receiver.signatures`` (``svix`` is open to every provider); the others
  it accepts are its ``signature_schemes``, and ``verifiers`` brings schemes of its own.
- ``auth_header``/``auth_scheme`` (or ``auth_headers``): how its API key is presented.
- ``job_path`` and ``parse_job``: its job endpoint and its answer as a ``JobStatus`` (state,
  the provider's word, result reference, error and its code, progress); ``ProviderError``
  when the answer has no status. A finished job's result is a ``ResultRef``: ``inline`` JSON,
  or a ``url`` (with its ``sha256`` when the provider states one) that jobhook streams to disk.
- ``list_path``/``parse_list`` (optional): its job list, for reconciliation.
- ``job_api_class`` (optional): a ``JobAPI`` subclass for APIs that sign each request or
  answer in several calls; ``webhooks = False`` for a provider that only is polled.
- ``retry_hint`` (optional): the wait an error body states when no ``Retry-After`` came.
- ``result_fields`` (optional): the fields and confidence its result's own shape holds.

Every adapter passes the shared contract suite (``receiver.providers.contract_suite``) against
a simulator of its provider.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import structlog

from receiver.errors import PayloadError
from receiver.models import Event, Progress, ResultRef, State

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from pydantic import BaseModel

    from receiver.models import Via

__all__ = [
    "FieldReading",
    "JobAuth",
    "JobStatus",
    "ListedJob",
    "Provider",
    "ResultRef",
    "Submission",
    "hinted_job",
    "presigned",
]

log = structlog.get_logger(__name__)
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
SIGNED_QUERY_KEYS = frozenset(
    {"x-amz-signature", "x-amz-credential", "x-goog-signature", "x-goog-credential", "sig",
     "signature"}
)  # fmt: skip
"""Query keys (lower-case) that make a URL presigned: S3 and Google Cloud Storage V4
signatures, an Azure SAS's ``sig``, a CloudFront or S3 V2 ``Signature`` (with ``Expires``)."""

ListedJob = tuple[str, str]
"""One entry of a provider's job list: (job id, the provider's status word)."""

FieldReading = tuple[str, float | None, str | None]
"""One field of a result: its name, its confidence (0..1) when the provider gives one, and its
value as text when it has one."""

JobAuth = Literal["api_key", "table", "sigv4"]
"""How a provider's job API authenticates: the source's ``api_key``; credentials in the
provider's own sub-table (``table_name``); or AWS Signature V4 with the environment's keys."""


@dataclass(frozen=True, slots=True)
class JobStatus:
    """The provider's job API answer, translated."""

    state: State
    provider_status: str
    result: ResultRef | None = None
    error: str | None = None
    progress: Progress | None = None
    error_code: str | None = None
    retry_after: float | None = None
    """Seconds the provider asks to wait before this job is asked about again (Azure's
    ``Retry-After`` on every status answer): the poller never asks sooner."""


@dataclass(frozen=True, slots=True)
class Submission:
    """A new job to create at the provider: ``POST`` ``body`` (JSON) to ``path``."""

    path: str
    body: dict[str, Any]


class Provider:
    """Base adapter: subclasses set the attributes and override the parsers.

    An adapter holds no connection and no secret: jobhook's ``JobAPI`` makes the requests
    (within the source's rate budget, with 429/5xx/404 translated once) and hands the adapter
    the JSON it got. Parsers never raise anything but ``PayloadError`` (a webhook) or
    ``ProviderError`` (a job or list answer), whatever the body.
    """

    name: ClassVar[str]
    """The provider's name: what ``sources.NAME.provider`` says, in logs and metrics."""
    status_words: Mapping[str, State]
    """Every status word the provider documents, webhook and job API alike, and its state."""
    webhook_has_result: bool = False
    """True when a webhook carries the result itself; otherwise the job API is asked."""
    auth_header: str = "Authorization"
    """The header that carries the API key."""
    auth_scheme: str = "Bearer "
    """The text before the key in ``auth_header`` (``""`` for a bare key)."""
    job_auth: ClassVar[JobAuth] = "api_key"
    """How the job API authenticates (``JobAuth``). Only an ``api_key`` provider takes the
    source's ``api_key``, and a polled one (``webhooks = False``) needs it."""
    cannot_resubmit: str | None = "{name}: jobhook knows no submission endpoint for this provider"
    """Why no job of this provider can be submitted again; None when ``resubmission`` can."""
    job_api_class: ClassVar[type[Any] | None] = None
    """The provider's own job API, a JobAPI subclass (signed requests, results of several
    calls); None: JobAPI. Typed loosely because jobapi imports this module."""
    table_name: ClassVar[str | None] = None
    """The name of the source's sub-table this provider reads (``azure``, ``gcp``), if any."""
    table_model: ClassVar[type[BaseModel] | None] = None
    """The model of that sub-table: configuration validates ``[sources.NAME.<table_name>]``
    with it (errors name the key's path) and ``from_settings`` hands ``__init__`` an instance
    of it, or None when the source has none (the adapter's defaults)."""
    table_required: ClassVar[bool] = False
    """True when a source of this provider must have its sub-table."""
    api_versions: ClassVar[tuple[str, ...]] = ()
    """The APIs a provider with several speaks, the default first: a source's
    ``api_version`` picks one; empty: the source takes no ``api_version``."""
    required_keys: ClassVar[Mapping[str, str]] = {}
    """Keys of ``[sources.NAME]`` every source of this provider sets, each with what it
    holds (said when it is missing)."""
    webhooks: ClassVar[bool] = True
    """False for a provider that announces nothing (a long-running operation is polled): its
    sources need no signing secret, and its jobs are polled from the start."""
    hint_job_field: ClassVar[str | None] = None
    """The field of an unsigned callback's JSON body that names the job: set by a provider
    whose callbacks are taken as hints (``webhook_mode = "direct"``); None: it sends none.
    A dotted path (``data.id``) reaches into an object; ``|`` separates paths tried in order
    (``hinted_job`` reads it)."""
    signature_schemes: ClassVar[tuple[str, ...]] = ()
    """The signature schemes besides ``svix`` (open to every provider) its webhooks may be
    signed with: built-in ones (``receiver.signatures``) or its own (``verifiers``)."""
    default_signature: ClassVar[str] = "svix"
    """The scheme of a source that names none."""
    verifiers: ClassVar[Mapping[str, Callable[..., Any]]] = {}
    """Schemes the provider brings itself, by name: each called with the source's secrets
    (and ``clock=``) makes its verifier (``receiver.signatures.SecretScheme``). Typed loosely
    because the signatures package is a neighbour, not a dependency."""
    sdk_loggers: ClassVar[tuple[str, ...]] = ()
    """The loggers of the SDKs the adapter uses, kept at WARNING whatever the service's level:
    their DEBUG and INFO lines hold request URLs and headers (``configure_logging``'s quiet)."""
    unsigned_only: ClassVar[bool] = False
    """True for a provider that never signs its callbacks (Docling Serve): its sources take
    them as hints only (``webhook_mode = "direct"``) and have no signing secret."""

    @classmethod
    def from_settings(
        cls, table: BaseModel | None = None, *, api_version: str | None = None
    ) -> Provider:
        """The adapter for one configured source: ``table`` is its sub-table
        (``[sources.NAME.<table_name>]``), ``api_version`` one of ``api_versions``; TypeError for
        a table that is not an instance of ``table_model``."""
        if table is not None and (
            cls.table_model is None or not isinstance(table, cls.table_model)
        ):
            wanted = f"a [{cls.table_name}] table" if cls.table_model else "no sub-table"
            raise TypeError(f"provider {cls.name!r} takes {wanted}, not {type(table).__name__}")
        return cls(table)

    @classmethod
    def check_source(cls, keys: Mapping[str, object], table: BaseModel | None) -> None:
        """ValueError saying what a source of this provider lacks or cannot have, given its
        ``[sources.NAME]`` keys as set and its validated sub-table. By default: the
        ``required_keys`` and, when ``table_required``, the table; a provider with rules of
        its own extends it."""
        missing = [
            f"{key} ({what})" for key, what in cls.required_keys.items() if not keys.get(key)
        ]
        if missing:
            raise ValueError(f"provider {cls.name!r} needs {' and '.join(missing)}")
        if cls.table_required and table is None:
            raise ValueError(f"provider {cls.name!r} needs a [sources.NAME.{cls.table_name}] table")

    def __init__(self, table: BaseModel | None = None) -> None:
        """``table``: the source's sub-table (see ``table_model``); None for the defaults."""

    def default_api_base_url(self) -> str | None:
        """Where the job API is when ``api_base_url`` is unset (a cloud's regional endpoint)."""
        return None

    def job_id(self, given: str) -> str:
        """The job id to keep for what a pipeline registers (an operation URL or name, made
        route-safe); ValueError saying what is expected when it is not such an identity."""
        return given

    def canonical(self, word: str, *, source: str, job_id: str) -> State:
        """Map a status word; an unknown word is kept, treated as queued and logged."""
        state = self.status_words.get(word)
        if state is None:
            log.warning("unknown_status_word", source=source, job_id=job_id, status=word)
            return State.QUEUED
        return state

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        """Translate a verified webhook body into an event; PayloadError when it has no job."""
        raise NotImplementedError

    def webhook_event(
        self,
        *,
        source: str,
        job_id: str,
        status: str,
        via: Via,
        message_id: str | None,
        metadata: object = None,
        error: object = None,
    ) -> Event:
        """The event a verified webhook (or callback) brings: ``status``, the provider's word,
        with its state; ``metadata`` when it is an object; ``error`` (text or an error object)
        as one line and its code."""
        return Event(
            source=source,
            job_id=job_id,
            state=self.canonical(status, source=source, job_id=job_id),
            provider_status=status,
            via=via,
            message_id=message_id,
            metadata=metadata if isinstance(metadata, dict) else {},
            error=describe_error(error),
            error_code=error_code(error),
        )

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers that present ``api_key`` to the job API."""
        return {self.auth_header: f"{self.auth_scheme}{api_key}"}

    def job_path(self, job_id: str) -> str:
        """The job endpoint's path relative to ``api_base_url``."""
        raise NotImplementedError

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        """Translate the job endpoint's JSON answer; ProviderError when it has no status."""
        raise NotImplementedError

    def list_path(self, *, cursor: str | None = None, status: str | None = None) -> str | None:
        """The list endpoint's path and query for one page; None when the provider has none.

        ``status`` is a provider status word to filter by, where the provider supports it.
        """
        return None

    def parse_list(self, body: Any) -> tuple[list[ListedJob], str | None]:
        """One page of the list endpoint: (job id, status word) pairs and the next cursor."""
        raise NotImplementedError(f"{self.name} has no list endpoint")

    def resubmission(self, body: Any, *, job_id: str, metadata: dict[str, Any]) -> Submission | str:
        """From the job API's answer about a finished job, the submission that runs it again
        with ``metadata``; or the reason it cannot (naming the provider and what is missing)."""
        return (self.cannot_resubmit or "{name}: cannot resubmit").format(name=self.name)

    def submitted_job_id(self, body: Any) -> str:
        """The new job's id in a submission's answer; ProviderError when it has none."""
        raise NotImplementedError

    def retry_hint(self, body: Any) -> float | None:
        """Seconds to wait, when an error body (429, 503) says so; None otherwise."""
        return None

    def result_takes_key(self, url: str, api_base_url: str) -> bool:
        """Whether a request for the result at ``url`` presents the API key: only a URL under
        the job API's base, and never a presigned one (its query carries its own signature,
        and a store such as S3 refuses a request authenticated twice)."""
        return url.startswith(api_base_url.rstrip("/") + "/") and not presigned(url)

    def result_fields(self, result: dict[str, Any]) -> Iterable[FieldReading]:
        """The fields a JSON result's own shape holds (a form's keys, typed document fields);
        none by default. Every result's top-level ``confidence`` map and ``extracted_data`` or
        ``fields`` values are read besides these (``receiver.pipeline.fields``); a reader
        never raises, whatever the result holds."""
        return ()


def hinted_job(payload: Any, field: str) -> str | None:
    """The job a callback names at ``field`` (``hint_job_field``): the first of its paths
    holding a non-empty string. A payload that is a string is read as the JSON it encodes
    (LlamaCloud's ``webhook_output_format = "string"``). None when no path names a job."""
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            return None
    for path in field.split("|"):
        value = payload
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value:
            return value
    return None


def presigned(url: str) -> bool:
    """True when ``url``'s query carries a signature (``SIGNED_QUERY_KEYS``)."""
    query = urlsplit(url).query
    return any(key.lower() in SIGNED_QUERY_KEYS for key, _ in parse_qsl(query, True))


def job_segment(job_id: str) -> str:
    """A job id made safe as one path segment (``/`` and ``?`` cannot change the route)."""
    return quote(job_id, safe="")


def with_query(path: str, **params: str | int | None) -> str:
    """``path`` with the non-None ``params`` as its query string."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{path}?{query}" if query else path


def require_str(body: Any, key: str) -> str:
    """``body[key]`` as a non-empty string, or a PayloadError naming the key."""
    if not isinstance(body, dict):
        raise PayloadError("invalid_payload", "the body is not a JSON object")
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError("invalid_payload", f"field {key!r} is missing or not a string")
    return value


def optional_dict(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def describe_error(value: object) -> str | None:
    """A provider's error as one line: a string as is, ``{code, message, request_id}`` as
    "code: message (request req_1)"."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        code, message = error_code(value), value.get("message")
        parts = [str(p) for p in (code, message) if isinstance(p, str | int) and p != ""]
        request = value.get("request_id")
        suffix = f" (request {request})" if isinstance(request, str) and request else ""
        if parts:
            return ": ".join(parts) + suffix
        return json.dumps(value, sort_keys=True) if value else None
    return None


def error_code(value: object) -> str | None:
    """The machine-readable code of a provider's error object, when it has one.

    Reducto's ``{code: 422, name: "DOCUMENT_CORRUPT"}`` keeps its enum in ``name`` (``code`` is
    an HTTP-like number); the others' ``{code: "PARSE_ERROR"}`` keep it in ``code``.
    """
    if not isinstance(value, dict):
        return None
    for key in ("name", "code"):
        code = value.get(key)
        if isinstance(code, str) and code:
            return code[:100]
    code = value.get("code")
    return str(code) if isinstance(code, int) and not isinstance(code, bool) else None


def number(value: object) -> float | None:
    """A finite JSON number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def page_count(value: object) -> int | None:
    """A non-negative whole count of pages, else None."""
    n = number(value)
    return int(n) if n is not None and n >= 0 and n == int(n) else None


def hex_sha256(value: object) -> str | None:
    """A sha256 digest as 64 lower-case hex digits; anything else cannot be checked: None."""
    return value.lower() if isinstance(value, str) and _SHA256.match(value) else None
