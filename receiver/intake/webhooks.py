"""``POST /webhooks/{source}``: cap the raw body, verify it, parse it, store it, answer."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from receiver import jsontext, tracing
from receiver.errors import (
    BodyTooLargeError,
    JobhookError,
    RejectedError,
    StoreUnavailableError,
    UnknownSourceError,
    VerificationError,
)
from receiver.signatures.base import AsyncVerifier

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.types import Receive, Scope, Send

    from receiver.config.settings import ServerSettings
    from receiver.intake.ingest import Ingestor
    from receiver.ops.metrics import Metrics
    from receiver.providers import Provider
    from receiver.signatures.base import Verifier
    from receiver.tracing import Span

log = structlog.get_logger("receiver.webhooks")


@dataclass(frozen=True, slots=True)
class Source:
    """A configured source as the endpoint needs it."""

    name: str
    provider: Provider
    verifier: Verifier | AsyncVerifier


class WebhookEndpoint:
    """The webhook route as a plain ASGI app: the hottest path skips Request/Response objects.

    Rejections raise RejectedError / RetryableError before anything is sent, so the app's
    exception handlers answer them exactly as they answer every other route. The ingestor is
    attached by the lifespan, once the store is open.
    """

    def __init__(
        self, sources: Mapping[str, Source], metrics: Metrics, settings: ServerSettings
    ) -> None:
        self.sources = sources
        self.metrics = metrics
        self.max_body_bytes = settings.max_body_bytes
        self.body_deadlines = BodyDeadlines(settings.body_timeout_seconds)
        self.ingestor: Ingestor | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not tracing.enabled():
            return await self.receive(scope, receive, send, tracing.NULL_SPAN)
        route = "/webhooks/{source}"
        source = scope["path_params"]["source"]
        with tracing.span(f"POST {route}", kind="server", attributes={
            "http.request.method": "POST", "http.route": route, "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"), "jobhook.source": source,
        }) as span:  # fmt: skip
            await self.receive(scope, receive, send, span)
        return None

    async def receive(self, scope: Scope, receive: Receive, send: Send, span: Span) -> None:
        """Answer one webhook; ``span`` (the request's) gets its outcome."""
        started = time.perf_counter()
        name: str = scope["path_params"]["source"]
        message_id = job_id = None
        try:
            source = self.sources.get(name)
            if source is None:
                raise UnknownSourceError("unknown_source", f"no source named {name!r}")
            headers = _headers(scope)
            body = await read_body(receive, headers, self.max_body_bytes, self.body_deadlines)
            if body is None:
                return  # the client went away before its body arrived: nothing to answer
            verifier = source.verifier
            with tracing.span("jobhook.webhook.verify"):
                if isinstance(verifier, AsyncVerifier):
                    signed = await verifier.verify(body, headers)
                else:
                    signed = verifier.verify(body, headers)
            message_id = signed.message_id
            if signed.handled is not None:
                await _handled(send, name, signed.handled, message_id)
                return
            payload = parse_json(body)
            event = source.provider.parse_webhook(payload, source=name, message_id=message_id)
            job_id = event.job_id
            if self.ingestor is None:
                raise StoreUnavailableError("the service is starting")
            if span is not tracing.NULL_SPAN:  # the completion keeps the trace it started in
                event = event.traced(tracing.traceparent())
            with tracing.span("jobhook.store.ingest"):
                result = await self.ingestor.ingest(event)
        except RejectedError as exc:
            _outcome(span, exc.reason, exc.status_code, message_id, job_id)
            log.warning("webhook_rejected", source=name, message_id=message_id, job_id=job_id,
                        outcome=exc.reason, status=exc.status_code)  # fmt: skip
            self.metrics.webhook(name, "rejected", time.perf_counter() - started, exc.reason)
            raise
        except JobhookError as exc:
            _outcome(span, type(exc).__name__, 503, message_id, job_id)
            span.fail(exc)
            log.error("webhook_failed", source=name, message_id=message_id, job_id=job_id,
                      outcome=type(exc).__name__, error=str(exc))  # fmt: skip
            self.metrics.webhook(name, "failed", time.perf_counter() - started)
            raise
        _outcome(span, result.status, 200, message_id, job_id)
        self.metrics.webhook(name, result.status, time.perf_counter() - started)
        log.info("webhook_" + result.status, source=name, message_id=message_id, job_id=job_id,
                 state=result.state.value, completed=result.completed)  # fmt: skip
        answer = orjson.dumps(
            {"status": result.status, "job_id": result.job_id, "state": result.state.value}
        )
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_JSON, (b"content-length", b"%d" % len(answer))]})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})


_JSON = ((b"content-type", b"application/json"),)


async def _handled(send: Send, source: str, status: str, message_id: str) -> None:
    """Answer a control message the signature scheme handled (nothing was stored)."""
    log.info("webhook_" + status, source=source, message_id=message_id)
    answer = orjson.dumps({"status": status})
    await send({"type": "http.response.start", "status": 200,
                "headers": [*_JSON, (b"content-length", b"%d" % len(answer))]})  # fmt: skip
    await send({"type": "http.response.body", "body": answer})


def _outcome(
    span: Span, outcome: str, status: int, message_id: str | None, job_id: str | None
) -> None:
    if span is tracing.NULL_SPAN:
        return
    span.set("http.response.status_code", status)
    span.set("jobhook.outcome", outcome)
    span.set("jobhook.duplicate", outcome == "duplicate")
    span.set("jobhook.message.id", message_id)
    span.set("jobhook.job.id", job_id)


def parse_json(body: bytes) -> Any:
    """The body's JSON; 400 ``invalid_json`` when it is not JSON, or holds no text.

    JSON can escape a lone UTF-16 surrogate (``"\\ud800"``), which ``json.loads`` accepts but
    no UTF-8 text can hold: the store would refuse it and the webhook get a 5xx, sent again and
    again. Only a body with a surrogate escape (``\\ud...``) is checked, so others pay nothing.
    """
    try:
        payload = jsontext.loads(body)
    except jsontext.TooDeepError:
        raise VerificationError("invalid_json", "the body's JSON is nested too deeply") from None
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        raise VerificationError("invalid_json", "the body is not valid JSON") from None
    if b"\\ud" in body or b"\\uD" in body:
        try:
            json.dumps(payload, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise VerificationError(
                "invalid_json", "the body escapes a lone UTF-16 surrogate, which is not text"
            ) from None
    return payload


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; the first of repeated names wins."""
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in reversed(scope["headers"])}


class BodyDeadlines:
    """Cuts off the requests whose body has not arrived ``seconds`` after their headers.

    uvicorn has no body-read timeout, so a client trickling bytes would hold a request forever.
    One timer watches every request, ticking while any is reading, and cancels the late ones
    within a quarter of ``seconds`` (at most 1 s) after their time: a timer per request
    (``call_later`` and its cancel) costs each webhook far more than a dict entry does.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.tick = min(1.0, seconds / 4)
        self.expired: set[asyncio.Task[Any]] = set()
        """Tasks this cancelled, until their read_body has seen it."""
        self._due: dict[asyncio.Task[Any], float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[Any]) -> None:
        loop = task.get_loop()
        self._due[task] = loop.time() + self.seconds
        if self._timer is None:
            self._timer = loop.call_later(self.tick, self._check, loop)

    def forget(self, task: asyncio.Task[Any]) -> None:
        self._due.pop(task, None)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        late = [task for task, due in self._due.items() if due <= now]
        for task in late:
            del self._due[task]
            self.expired.add(task)
            task.cancel()
        self._timer = loop.call_later(self.tick, self._check, loop) if self._due else None


async def read_body(
    receive: Receive, headers: Mapping[str, str], limit: int, deadlines: BodyDeadlines | None = None
) -> bytes | None:
    """The raw body, refused with 413 as soon as it (or its Content-Length) exceeds ``limit``;
    None when the client disconnects first; 408 when ``deadlines`` cuts it off.
    """
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise RejectedError("invalid_content_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise BodyTooLargeError("body_too_large", f"the body exceeds {limit} bytes")
    task = asyncio.current_task()
    if deadlines is not None and task is not None:
        deadlines.watch(task)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLargeError("body_too_large", f"the body exceeds {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
    except asyncio.CancelledError:
        if deadlines is not None and task in deadlines.expired:
            deadlines.expired.discard(task)
            if task is not None and task.uncancel() == 0:
                raise RejectedError(
                    "body_timeout",
                    f"the body did not arrive within {deadlines.seconds:g} s",
                    status_code=408,
                ) from None
        raise
    finally:
        if deadlines is not None and task is not None:
            deadlines.forget(task)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
