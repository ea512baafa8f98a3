"""What a simulated provider looks like on the wire: routes, auth, status words and bodies."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    import random
    from collections.abc import Iterator, Mapping

    from receiver.sim.jobs import Job, Outcome, Phase, ResultMode, Snapshot, WebhookMode

ErrorKind = Literal["unauthorized", "not_found", "rate_limited", "server_error", "bad_request"]
BlobKind = Literal["json", "zip"]


class QueryError(ValueError):
    """A list endpoint's query string is invalid (answered 400)."""


@dataclass(frozen=True, slots=True)
class Submission:
    """What a submission asked for: its metadata, and where (and how) its webhooks go."""

    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = ""
    webhook_url: str | None = None
    webhook_mode: WebhookMode = "svix"
    document: str | None = None
    """The document's URL, where the submission names one."""
    webhook_headers: dict[str, str] = field(default_factory=dict)
    """Headers the submission asked its (unsigned) callbacks to carry."""


def json_object(body: Any, what: str = "the body") -> dict[str, Any]:
    """``body`` as a JSON object, or a QueryError (answered 400)."""
    if not isinstance(body, dict):
        raise QueryError(f"{what} must be a JSON object")
    return body


def webhook_url(value: Any, name: str) -> str | None:
    """An http(s) webhook URL from a submission (None when absent), or a QueryError."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise QueryError(f"{name} must be an http(s) URL")
    return value


@dataclass(frozen=True, slots=True)
class ResultLink:
    """A freshly minted presigned URL for a job's result."""

    url: str
    expires: int
    blob_id: str
    sha256: str | None = None


def iso(t: float) -> str:
    """Unix seconds as the providers write them: ``2026-11-20T10:00:00Z``."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str, name: str) -> float:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise QueryError(f"{name} is not an ISO 8601 timestamp") from None


def int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise QueryError(f"{name} must be an integer") from None
    if not low <= value <= high:
        raise QueryError(f"{name} must be between {low} and {high}")
    return value


class Shape:
    """Base of the four provider shapes; subclasses set the class attributes and bodies."""

    name: ClassVar[str]
    key_header: ClassVar[str] = "authorization"
    bearer: ClassVar[bool] = True
    ratelimit_prefix: ClassVar[str] = "RateLimit"
    default_rpm: ClassVar[float] = 120.0
    results: ClassVar[tuple[ResultMode, ...]] = ("inline",)
    blob_kind: ClassVar[BlobKind] = "json"
    reports_checksum: ClassVar[bool] = False
    job_route: ClassVar[str]
    list_route: ClassVar[str | None] = None
    older_routes: ClassVar[tuple[tuple[str, str | None], ...]] = ()
    """(job route, list route) of older API versions still served with the same bodies."""
    running: ClassVar[tuple[Phase, ...]]
    succeeded: ClassVar[Phase]
    failed: ClassVar[Phase]
    webhook_on_running: ClassVar[bool] = False
    event_prefix: ClassVar[str] = "msg_"
    failures: ClassVar[Mapping[str, str]]
    submit_routes: ClassVar[tuple[str, ...]] = ()
    """``POST`` routes that create a job (answered by ``submitted_body``)."""
    submit_status: ClassVar[int] = 200
    cancel_route: ClassVar[str | None] = None
    cancelled: ClassVar[Phase | None] = None
    """The documented error codes of a failed job and their messages; the first is the default."""
    transient: ClassVar[frozenset[str]] = frozenset()
    """Failure codes a new submission of the same document does not repeat (the others do)."""
    result_route: ClassVar[str | None] = None
    """A route of the job API that serves a finished job's result itself (behind the API key)."""
    result_removal: ClassVar[float | None] = None
    """Seconds after its first fetch that a result served at ``result_route`` is removed."""
    not_found: ClassVar[str] = "Job not found"
    """What the job route answers (404) about a job it does not know."""
    long_poll: ClassVar[bool] = False
    """Whether the job route takes ``?wait=SECONDS`` and answers once the job ends, or then."""

    def result_chunks(self, job: Job, size: int) -> Iterator[bytes]:
        """The body ``result_route`` serves for ``job``, about ``size`` bytes, in pieces."""
        raise NotImplementedError

    def document_of(self, job: Job) -> str | None:
        """The document a job processes, as a resubmission names it."""
        return job.document

    def failure(self, job: Job) -> tuple[str, str]:
        """A failed job's (error code, message)."""
        code = job.error_code or next(iter(self.failures))
        return code, self.failures[code]

    def phases_for(self, outcome: Outcome) -> tuple[Phase, ...]:
        """The job's status words in order; phases marked success-only are skipped on failure."""
        if outcome == "succeeded":
            return (*self.running, self.succeeded)
        return (*(p for p in self.running if not p.success_only), self.failed)

    def new_id(self, rng: random.Random) -> str:
        return f"job_{rng.getrandbits(48):012x}"

    def presented_key(self, headers: Mapping[str, str]) -> str | None:
        """The API key the request carries in this provider's header, if any."""
        value = headers.get(self.key_header)
        if not value:
            return None
        if not self.bearer:
            return value
        scheme, _, token = value.partition(" ")
        return (token.strip() or None) if scheme.lower() == "bearer" else None

    def sends_webhook(self, job: Job, index: int) -> bool:
        """Whether entering phase ``index`` sends a webhook (never the initial phase)."""
        return index > 0 and (job.phases[index].terminal or self.webhook_on_running)

    def job_body(self, job: Job, snap: Snapshot, link: ResultLink | None) -> dict[str, Any]:
        """The job GET endpoint's JSON body."""
        raise NotImplementedError

    def read_submission(self, path: str, body: Any) -> Submission:
        """What a ``POST`` to ``path`` (one of ``submit_routes``) asks; QueryError when invalid."""
        raise NotImplementedError

    def submitted_body(self, job: Job, snap: Snapshot) -> dict[str, Any]:
        """The answer to a submission that created ``job``."""
        raise NotImplementedError

    def list_body(
        self, jobs: list[tuple[Job, Snapshot]], query: Mapping[str, str]
    ) -> dict[str, Any]:
        """The list endpoint's JSON body; ``jobs`` come newest first. QueryError when invalid."""
        raise NotImplementedError

    def webhook_body(self, job: Job, phase: Phase, at: float, event_id: str) -> dict[str, Any]:
        """The webhook payload announcing that ``job`` entered ``phase`` at ``at``."""
        raise NotImplementedError

    def error_body(
        self, kind: ErrorKind, message: str, *, retry_after: int | None, request_id: str
    ) -> dict[str, Any]:
        """An error answer's JSON body in the provider's own style."""
        raise NotImplementedError

    def native_headers(
        self, secret: bytes, body: bytes, event_id: str, timestamp: int
    ) -> dict[str, str]:
        """The provider's own signature headers, beside the Standard Webhooks ones."""
        return {}


def hmac_hex(secret: bytes, message: bytes) -> str:
    return hmac.new(secret, message, "sha256").hexdigest()


def cursor_page(
    items: list[tuple[Job, Snapshot]], query: Mapping[str, str], default: int
) -> tuple[list[tuple[Job, Snapshot]], str | None]:
    """One page of an opaque-cursor listing and the cursor of the next page (or None)."""
    limit = int_param(query, "limit", default, 1, 1000)
    start = int_param(query, "cursor", 0, 0, 10**9)
    page = items[start : start + limit]
    return page, (str(start + limit) if start + limit < len(items) else None)
