"""What a provider adapter knows: its webhook body, its status words, its job and list APIs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, urlencode

import structlog

from receiver.errors import PayloadError
from receiver.models import Event, Progress, ResultRef, State

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

    from receiver.models import Via
    from receiver.providers.mapping import GenericSettings

__all__ = ["JobStatus", "ListedJob", "Provider", "ResultRef", "Submission"]

log = structlog.get_logger(__name__)
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")

ListedJob = tuple[str, str]
"""One entry of a provider's job list: (job id, the provider's status word)."""


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
    """Base adapter: subclasses set the attributes and override the parsers."""

    name: ClassVar[str]
    status_words: Mapping[str, State]
    webhook_has_result: bool = False
    auth_header: str = "Authorization"
    auth_scheme: str = "Bearer "
    cannot_resubmit: str | None = "{name}: jobhook knows no submission endpoint for this provider"
    """Why no job of this provider can be submitted again; None when ``resubmission`` can."""
    job_api_class: ClassVar[type[Any] | None] = None
    """The provider's own job API, a JobAPI subclass (signed requests, results of several
    calls); None: JobAPI. Typed loosely because jobapi imports this module."""
    table_name: ClassVar[str | None] = None
    """The name of the source's sub-table this provider reads (``azure``, ``gcp``), if any."""
    webhooks: ClassVar[bool] = True
    """False for a provider that announces nothing (a long-running operation is polled): its
    sources need no signing secret, and its jobs are polled from the start."""

    @classmethod
    def from_settings(
        cls,
        generic: GenericSettings | None,
        *,
        api_version: str | None = None,
        table: BaseModel | None = None,
    ) -> Provider:
        """The adapter for one configured source; ``generic`` reads its table, a cloud
        provider its own (``table``: ``[sources.NAME.aws]``...)."""
        return cls()

    def default_api_base_url(self) -> str | None:
        """Where the job API is when ``api_base_url`` is unset (a cloud's regional endpoint)."""
        return None

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

    def auth_headers(self, api_key: str) -> dict[str, str]:
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
