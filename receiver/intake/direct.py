"""Unsigned callbacks, taken as hints only: Reducto's direct webhooks, Docling Serve's and
LlamaParse's (without a signing secret) callbacks.

Such a callback is an unsigned POST naming a job: anyone who learns where it goes can send one.
So the body is never believed. A secret path token (``POST /webhooks/{source}/{token}``) or a
secret header value (``POST /webhooks/{source}`` with ``direct_header``), compared in constant
time with every configured value, keeps strangers out; what passes is reduced to "look at job X
soon", and the job's truth comes from the provider's job API (within the source's rate budget),
after which the job proceeds as if polled. Hints for the same job collapse while one waits, and
hints for jobs jobhook does not track are looked up only ``unknown_per_minute`` times a minute,
so a flood of made-up ids cannot spend the provider's rate limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import structlog
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse

from receiver.errors import (
    PayloadError,
    ProviderError,
    StoreUnavailableError,
    UnknownSourceError,
    VerificationError,
)
from receiver.intake.webhooks import BodyDeadlines, parse_json, read_body
from receiver.models import Event
from receiver.providers.base import hinted_job
from receiver.providers.jobapi import JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

    from receiver.intake.ingest import Ingestor
    from receiver.providers.jobapi import JobAPI
    from receiver.secret import Secret
    from receiver.signatures.base import Verified
    from receiver.store import Engine

log = structlog.get_logger("receiver.direct")
Offer = Literal["queued", "duplicate", "over_budget"]
MAX_JOB_ID = 256
MAX_PENDING = 10_000


class SignedWebhooksOff:
    """The verifier of a direct-mode source without secrets: its signed route refuses all."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        raise VerificationError("no_signed_webhooks", "this source takes direct webhooks only")


def token_matches(presented: str, tokens: Sequence[Secret]) -> bool:
    """Whether ``presented`` is one of ``tokens``; every token is compared, in constant time."""
    given = presented.encode()
    return any([hmac.compare_digest(given, t.reveal().encode()) for t in tokens])


class DirectHints:
    """The hints waiting for their job API call, and the one loop that makes those calls."""

    def __init__(
        self,
        store: Engine,
        ingestor: Ingestor,
        apis: Mapping[str, JobAPI],
        unknown_per_minute: Mapping[str, int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ingestor = ingestor
        self._apis = apis
        self._budget = unknown_per_minute
        self._clock = clock
        self._pending: dict[tuple[str, str], None] = {}
        self._spent: dict[str, deque[float]] = {}
        self._wake = asyncio.Event()
        self.counts: dict[str, int] = {}

    async def offer(self, source: str, job_id: str) -> Offer:
        """Queue a look at the job, unless one is queued or an unknown job is over budget."""
        key = (source, job_id)
        if key in self._pending:
            return self._count("duplicate")
        if len(self._pending) >= MAX_PENDING:
            return self._count("over_budget")
        if await self._store.get_job(source, job_id) is None and not self._spend(source):
            return self._count("over_budget")
        self._pending[key] = None
        self._wake.set()
        return self._count("queued")

    def _spend(self, source: str) -> bool:
        now = self._clock()
        spent = self._spent.setdefault(source, deque())
        while spent and spent[0] <= now - 60.0:
            spent.popleft()
        if len(spent) >= self._budget.get(source, 0):
            return False
        spent.append(now)
        return True

    def _count(self, outcome: Offer) -> Offer:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        return outcome

    async def run_once(self) -> int:
        """Look up every job hinted so far; returns how many were looked up."""
        keys, self._pending = list(self._pending), {}
        for source, job_id in keys:
            await self.check(source, job_id)
        return len(keys)

    async def check(self, source: str, job_id: str) -> None:
        """Ask the job API about the job and ingest what it says, as a poll would."""
        try:
            status = await self._apis[source].get_job(job_id)
        except JobNotFoundError:
            log.warning("direct_hint_unknown_job", source=source, job_id=job_id)
            return
        except (
            ProviderError
        ) as exc:  # a tracked job is still polled; an untracked one was never real
            log.info("direct_hint_check_failed", source=source, job_id=job_id, error=str(exc))
            return
        event = Event(
            source=source,
            job_id=job_id,
            state=status.state,
            provider_status=status.provider_status,
            via="poll",
            error=status.error,
            error_code=status.error_code,
            progress=status.progress,
            result=status.result if status.state.terminal else None,
        )
        result = await self._ingestor.ingest(event)
        log.info("direct_hint_checked", source=source, job_id=job_id,
                 state=result.state.value, completed=result.completed)  # fmt: skip

    async def run(self, stop: asyncio.Event) -> None:
        """Repeat ``run_once`` whenever hints arrive, until ``stop`` is set."""
        while not stop.is_set():
            waiter = asyncio.ensure_future(self._wake.wait())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait((waiter, stopper), return_when=asyncio.FIRST_COMPLETED)
            for task in (waiter, stopper):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._wake.clear()
            try:
                await self.run_once()
            except Exception:
                log.exception("direct_hints_step_failed")


@dataclass(frozen=True, slots=True)
class HintAuth:
    """How one source's callbacks prove they come from where its jobs were sent."""

    job_field: str
    """The body's field naming the job (the provider's ``hint_job_field``)."""
    tokens: Sequence[Secret] = ()
    header: str | None = None
    header_values: Sequence[Secret] = ()


class DirectEndpoint:
    """The route: the token or header, then a capped body naming a job; 202 once it is queued."""

    def __init__(
        self, auth: Mapping[str, HintAuth], max_body_bytes: int, body_timeout: float
    ) -> None:
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.deadlines = BodyDeadlines(body_timeout)
        self.hints: DirectHints | None = None
        self.by_header = frozenset(name for name, a in auth.items() if a.header is not None)
        """The sources whose hints come to ``/webhooks/{source}`` with a header."""

    async def handle(self, request: Request) -> Response:
        """The route's endpoint (a token in the path, or a header on the source's own route)."""
        name: str = request.path_params["source"]
        auth = self.auth.get(name)
        token = request.path_params.get("token")
        if token is None:
            presented = request.headers.get(auth.header) if auth and auth.header else None
            valid = auth is not None and token_matches(presented or "", auth.header_values)
        else:
            valid = auth is not None and token_matches(token, auth.tokens)
        # A wrong token looks like a URL that does not exist, and is never logged.
        if auth is None or not valid:
            if token is None and auth is not None:
                raise VerificationError(
                    "invalid_token", "the callback does not carry a configured header value",
                    status_code=401,
                )  # fmt: skip
            raise UnknownSourceError("unknown_source", f"no source named {name!r}")
        body = await read_body(
            request.receive, request.headers, self.max_body_bytes, self.deadlines
        )
        if body is None:
            return JSONResponse({"error": "no_body"}, status_code=400)
        payload = parse_json(body)
        job_id = hinted_job(payload, auth.job_field)
        if job_id is None or len(job_id) > MAX_JOB_ID:
            raise PayloadError(
                "invalid_payload", f"field {auth.job_field!r} is missing or not a job id"
            )
        if self.hints is None:
            raise StoreUnavailableError("the service is starting")
        outcome = await self.hints.offer(name, job_id)
        log.info("direct_hint", source=name, job_id=job_id, outcome=outcome)
        if outcome == "over_budget":
            return JSONResponse(
                {"error": "too_many_hints", "detail": "hints for untracked jobs are rationed"},
                status_code=429,
                headers={"Retry-After": "60"},
            )
        return JSONResponse({"status": "hinted", "job_id": job_id}, status_code=202)


class HeaderHints:
    """``/webhooks/{source}`` as an ASGI app: a source whose hints come with a header is
    answered by the hint endpoint, every other by the signed webhook endpoint as before."""

    def __init__(self, webhook: ASGIApp, hints: DirectEndpoint) -> None:
        self.webhook = webhook
        self.hints = hints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("path_params", {}).get("source") in self.hints.by_header:
            response = await self.hints.handle(StarletteRequest(scope, receive))
            await response(scope, receive, send)
            return
        await self.webhook(scope, receive, send)
