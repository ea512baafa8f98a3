"""The client without I/O: requests as ``Call`` values, answers mapped to documents or errors,
and the retry plans of ``wait`` and ``events`` as small state machines.

``Client`` (httpx.Client) and ``AsyncClient`` (httpx.AsyncClient) only send what this module
builds and feed back what they receive, so both behave alike by construction (the sans-IO
design of httpx's and h11's cores).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from receiver.client.errors import (
    ApiError,
    BadRequest,
    Forbidden,
    JobhookError,
    NotFound,
    ProtocolError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
    WaitTimeout,
)
from receiver.client.models import Completion, JobDetail

M = TypeVar("M", bound=BaseModel)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

DEFAULT_URL = "http://127.0.0.1:8000"
URL_VARIABLE = "JOBHOOK_URL"
TOKEN_VARIABLE = "JOBHOOK_ADMIN_TOKEN"  # noqa: S105 - the variable's name
NO_ADMIN_API = "the service has no token ([[server.tokens]] or server.admin_token)"
"""Why a service answers a bare 404 for the admin API: it mounts it only with a token."""
LONG_POLL_SECONDS = 30.0
"""One ``/wait`` request's timeout; the service allows at most 300."""
MAX_LONG_POLL_SECONDS = 300.0
REPROCESS_READ_SECONDS = 600.0
"""A reprocess call waits for the provider's rate budget, one submission after another."""
DEFAULT_HEARTBEAT = 15.0


class Filters(TypedDict, total=False):
    """``GET /jobs``'s filters, all optional and combined with AND."""

    source: str
    state: str
    created_after: datetime | float | str
    created_before: datetime | float | str
    metadata: Mapping[str, object]
    min_confidence: float
    error_code: str
    field: str
    max_confidence: float


Params = list[tuple[str, str]]


@dataclass(frozen=True)
class Call:
    """One request to the admin API; ``read_timeout`` None means the client's own."""

    method: str
    path: str
    params: Params = field(default_factory=list)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    read_timeout: float | None = None


class Token:
    """The admin token; its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Token('**********')"

    __str__ = __repr__


@dataclass(frozen=True)
class Target:
    """Where the admin API is and the token it takes, from arguments or the environment."""

    url: str
    token: Token | None

    @classmethod
    def resolve(
        cls, url: str | None, token: str | None, environ: Mapping[str, str] | None = None
    ) -> Target:
        env = os.environ if environ is None else environ
        base = (url or env.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"the jobhook URL must start with http:// or https://, not {base!r}")
        secret = token if token is not None else env.get(TOKEN_VARIABLE)
        return cls(base, Token(secret) if secret else None)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token.reveal()}"} if self.token else {}


def job_path(source: str, job_id: str) -> str:
    return f"/jobs/{quote(source, safe='')}/{quote(job_id, safe='')}"


def time_text(value: datetime | float | str) -> str:
    """A time filter as the API reads it: ISO 8601 (naive means UTC) or Unix seconds."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def filter_params(filters: Filters) -> Params:
    """The filters as query parameters, metadata as repeated ``key:value``."""
    unknown = set(filters) - set(Filters.__annotations__)
    if unknown:
        raise TypeError(f"unknown filter {sorted(unknown)[0]!r}")
    params: Params = []
    for name, value in filters.items():
        if value is None:
            continue
        if name == "metadata":
            pairs = cast("Mapping[str, object]", value)
            params += [("metadata", f"{key}:{text(item)}") for key, item in pairs.items()]
        elif name in ("created_after", "created_before"):
            params.append((name, time_text(cast("datetime | float | str", value))))
        else:
            params.append((name, str(value)))
    return params


def text(value: object) -> str:
    """A metadata value as the API compares it: text, JSON words for booleans and null."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def list_jobs(params: Sequence[tuple[str, str]], limit: int, cursor: str | None) -> Call:
    query = [*params, ("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
    return Call("GET", "/jobs", query)


def get_job(source: str, job_id: str) -> Call:
    return Call("GET", job_path(source, job_id))


def track(source: str, job_id: str, metadata: Mapping[str, Any], pages: int | None) -> Call:
    body = {"source": source, "job_id": job_id, "metadata": dict(metadata), "pages": pages}
    return Call("POST", "/jobs", body=body)


def wait_once(source: str, job_id: str, seconds: float) -> Call:
    """One long-poll of at most ``seconds``: 200 once terminal, 202 with the job as it stands."""
    seconds = min(max(seconds, 0.0), MAX_LONG_POLL_SECONDS)
    return Call("GET", job_path(source, job_id) + "/wait", [("timeout", f"{seconds:.3f}")],
                read_timeout=seconds + 30.0)  # fmt: skip


def replay(source: str, job_id: str, handler: str | None, include_succeeded: bool) -> Call:
    body = {"handler": handler, "include_succeeded": include_succeeded}
    return Call("POST", job_path(source, job_id) + "/replay", body=body)


def replay_matching(body: Mapping[str, Any]) -> Call:
    """``POST /jobs/replay``: one call of a bulk replay (or its dry run)."""
    return Call("POST", "/jobs/replay", body=dict(body))


def reprocess(source: str, job_id: str, force: bool) -> Call:
    return Call("POST", job_path(source, job_id) + "/reprocess", body={"force": force},
                read_timeout=REPROCESS_READ_SECONDS)  # fmt: skip


def reprocess_matching(body: Mapping[str, Any]) -> Call:
    """``POST /jobs/reprocess``: one call of a bulk reprocess (or its dry run)."""
    return Call("POST", "/jobs/reprocess", body=dict(body), read_timeout=REPROCESS_READ_SECONDS)


def audit(params: Sequence[tuple[str, str]], limit: int, cursor: str | None) -> Call:
    """``GET /audit``: one page of the audit trail, newest first (an admin token's)."""
    query = [*params, ("limit", str(limit))] + ([("cursor", cursor)] if cursor else [])
    return Call("GET", "/audit", query)


def audit_params(
    token: str | None, action: str | None, after: datetime | float | str | None,
    before: datetime | float | str | None,
) -> Params:  # fmt: skip
    """``GET /audit``'s filters as query parameters (None: not filtered)."""
    pairs = (("token", token), ("action", action), ("after", after), ("before", before))
    return [(name, time_text(value)) for name, value in pairs if value is not None]


def stats(period: str) -> Call:
    return Call("GET", "/jobs/stats", [("period", period)])


def service_status() -> Call:
    """``GET /status``: readiness, store, sources with budgets and backlog, circuits."""
    return Call("GET", "/status")


def export(
    params: Sequence[tuple[str, str]], fmt: str, include_result: bool, fields: str | None
) -> Call:
    query = [*params, ("format", fmt), ("include_result", str(include_result).lower())]
    return Call("GET", "/jobs/export", query + ([("fields", fields)] if fields else []))


def events(last_event_id: int | None, heartbeat: float) -> Call:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    # A silent connection for three heartbeats is a dead one.
    return Call("GET", "/events", [("heartbeat", f"{heartbeat:g}")], headers=headers,
                read_timeout=heartbeat * 3 + 5.0)  # fmt: skip


def error_for(
    status: int, reason: str, body: bytes, headers: Mapping[str, str], *, token_given: bool
) -> ApiError:
    """The error an answer of ``status`` (4xx/5xx) with the API's ``{error, detail}`` body means."""
    code, message = "", ""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        code, message = str(doc.get("error") or ""), str(doc.get("detail") or "")
    retry_after = _seconds(headers.get("retry-after"))
    if status == 401:
        message = message if token_given else "no admin token given (pass token= or set " \
            f"{TOKEN_VARIABLE})"  # fmt: skip
        return Unauthorized(status, code or "unauthorized", message)
    if status == 403:
        needs = str(doc.get("needs") or "") if isinstance(doc, dict) else ""
        return Forbidden(status, code or "forbidden", message or reason, needs=needs)
    if status == 404 and not code:
        return NotFound(status, "", f"no admin API there: a wrong URL, or {NO_ADMIN_API}")
    kind: type[ApiError] = ApiError
    if status in (400, 413, 422):
        kind = BadRequest
    elif status == 404:
        kind = NotFound
    elif status >= 500:
        kind = ServiceUnavailable
    return kind(status, code, message or code or reason, retry_after=retry_after)


def _seconds(text: str | None) -> float | None:
    """``Retry-After`` in seconds (an HTTP date, or nonsense, gives None)."""
    try:
        seconds = float(text) if text else math.nan
    except ValueError:
        return None
    return max(seconds, 0.0) if math.isfinite(seconds) else None


def document(body: bytes) -> Any:
    """A 2xx answer's JSON document."""
    try:
        return json.loads(body)
    except ValueError:
        raise ProtocolError("the answer is not JSON: is the URL jobhook's?") from None


def parse(model: type[M], doc: Any) -> M:
    """``doc`` as ``model``; ProtocolError when it does not have that shape."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        raise ProtocolError(f"the answer is not the admin API's: {where}: {first['msg']}") from None


def retryable(exc: JobhookError) -> bool:
    """Worth trying again: the service was unreachable, broke the connection, or was down."""
    return isinstance(exc, TransportError | ServiceUnavailable)


@dataclass
class Backoff:
    """Delays that double from ``initial`` up to ``maximum``, each jittered by up to half."""

    initial: float = 0.1
    maximum: float = 2.0
    _next: float = 0.0

    def delay(self) -> float:
        self._next = min(self.maximum, self._next * 2 if self._next else self.initial)
        return self._next * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self._next = 0.0


class WaitPlan:
    """``wait``: long-poll until the job is terminal, retrying transport failures and 5xx with
    bounded backoff, until ``timeout`` seconds in all (None: no limit)."""

    def __init__(
        self,
        source: str,
        job_id: str,
        timeout: float | None,
        poll: float = LONG_POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be at least 0 seconds")
        if not 0 < poll <= MAX_LONG_POLL_SECONDS:
            raise ValueError(f"poll must be more than 0 and at most {MAX_LONG_POLL_SECONDS:g}")
        self.source, self.job_id, self.timeout, self.poll = source, job_id, timeout, poll
        self.clock = clock
        self.deadline = None if timeout is None else clock() + timeout
        self.last: JobDetail | None = None
        self.asked = False
        self.backoff = Backoff()

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock()

    def next_call(self) -> Call:
        """The next long-poll; WaitTimeout once the time is up (after at least one ask)."""
        left = self.left()
        if left is not None and left <= 0 and self.asked:
            raise self._timeout()
        self.asked = True
        return wait_once(
            self.source, self.job_id, self.poll if left is None else min(left, self.poll)
        )

    def answered(self, status: int, doc: Any) -> JobDetail | None:
        """The detail once terminal; None to ask again."""
        self.backoff.reset()
        self.last = parse(JobDetail, doc)
        return self.last if status == 200 and self.last.job.terminal else None

    def failed(self, exc: JobhookError) -> float:
        """Seconds to sleep before asking again; re-raises what retrying cannot mend."""
        if not retryable(exc):
            raise exc
        delay = self.backoff.delay()
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, self.backoff.maximum))
        left = self.left()
        if left is not None:
            if left <= 0:
                raise self._timeout() from exc
            delay = min(delay, left)
        return delay

    def _timeout(self) -> WaitTimeout:
        return WaitTimeout(self.source, self.job_id, self.timeout or 0.0, self.last)


class EventsPlan:
    """``events``: read ``/events`` and reconnect with ``Last-Event-ID`` whenever the stream
    breaks or ends, backing off up to the server's ``retry``, for at most ``give_up_after``
    seconds of failing in a row (None: never give up)."""

    def __init__(
        self,
        last_event_id: int | None,
        heartbeat: float = DEFAULT_HEARTBEAT,
        give_up_after: float | None = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0.1 <= heartbeat <= 300:
            raise ValueError("heartbeat must be from 0.1 to 300 seconds")
        self.last_event_id = last_event_id
        self.heartbeat = heartbeat
        self.give_up_after = give_up_after
        self.clock = clock
        self.backoff = Backoff()
        self.failing_since: float | None = None
        self._reset_event()

    def _reset_event(self) -> None:
        self._data: list[str] = []
        self._kind = ""
        self._id: str | None = None

    def call(self) -> Call:
        self._reset_event()  # a half-received event is sent again after the reconnect
        return events(self.last_event_id, self.heartbeat)

    def _alive(self) -> None:
        self.failing_since = None
        self.backoff.reset()

    def line(self, text: str) -> Completion | None:
        """Feed one line of the stream; a completion when it ends an event not seen before."""
        if text == "":
            data, kind, ident = "\n".join(self._data), self._kind or "message", self._id
            self._reset_event()
            if kind != "completion" or not data:
                return None
            completion = parse(Completion, document(data.encode()))
            self._alive()
            if ident is not None and ident.isdigit():
                seen = self.last_event_id
                self.last_event_id = int(ident)
                if seen is not None and int(ident) <= seen:
                    return None
            return completion
        if text.startswith(":"):
            if text.startswith(": heartbeat"):
                self._alive()
            return None
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._kind = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.backoff.maximum = max(int(value) / 1000, self.backoff.initial)
        return None

    def failed(self, exc: JobhookError | None) -> float:
        """Seconds to wait before reconnecting (``exc`` None: the stream ended cleanly);
        re-raises what reconnecting cannot mend, or once it has failed for too long."""
        if exc is not None and not retryable(exc):
            raise exc
        now = self.clock()
        if self.failing_since is None:
            self.failing_since = now
        elif self.give_up_after is not None and now - self.failing_since > self.give_up_after:
            if exc is not None:
                raise exc
            raise ProtocolError("the event stream keeps ending at once")
        return self.backoff.delay()
