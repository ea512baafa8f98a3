"""``POST /webhooks/{source}``: cap the raw body, verify it, parse it, store it, answer."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from starlette.responses import JSONResponse

from receiver.errors import (
    BodyTooLargeError,
    JobhookError,
    RejectedError,
    UnknownSourceError,
    VerificationError,
)

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.ingest import Ingestor
    from receiver.providers import Provider
    from receiver.verify import Verifier

log = structlog.get_logger("receiver.webhooks")


@dataclass(frozen=True, slots=True)
class Source:
    """A configured source as the endpoint needs it."""

    name: str
    provider: Provider
    verifier: Verifier


async def read_body(request: Request, limit: int, seconds: float | None = None) -> bytes:
    """The raw body, refused with 413 as soon as it (or its Content-Length) exceeds ``limit``.

    A body that has not fully arrived ``seconds`` after its headers is refused with 408:
    uvicorn has no body-read timeout, so a client trickling bytes would hold a request forever.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise RejectedError("invalid_content_length", "Content-Length is not a number")
        if int(declared) > limit:
            raise BodyTooLargeError("body_too_large", f"the body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLargeError("body_too_large", f"the body exceeds {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise RejectedError(
            "body_timeout", f"the body did not arrive within {seconds:g} s", status_code=408
        ) from None
    return b"".join(chunks)


async def receive(request: Request) -> JSONResponse:
    started = time.perf_counter()
    state = request.app.state
    name: str = request.path_params["source"]
    source: Source | None = state.sources.get(name)
    bound = log.bind(source=name)
    try:
        if source is None:
            raise UnknownSourceError("unknown_source", f"no source named {name!r}")
        body = await read_body(
            request, state.max_body_bytes, state.settings.server.body_timeout_seconds
        )
        signed = source.verifier.verify(body, request.headers)
        bound = bound.bind(message_id=signed.message_id)
        try:
            payload = json.loads(body)
        except json.JSONDecodeError:
            raise VerificationError("invalid_json", "the body is not valid JSON") from None
        event = source.provider.parse_webhook(payload, source=name, message_id=signed.message_id)
        bound = bound.bind(job_id=event.job_id)
        ingestor: Ingestor = state.ingestor
        result = await ingestor.ingest(event)
    except RejectedError as exc:
        bound.warning("webhook_rejected", outcome=exc.reason, status=exc.status_code)
        state.metrics.webhook(name, "rejected", time.perf_counter() - started, exc.reason)
        raise
    except JobhookError as exc:
        bound.error("webhook_failed", outcome=type(exc).__name__, error=str(exc))
        state.metrics.webhook(name, "failed", time.perf_counter() - started)
        raise
    state.metrics.webhook(name, result.status, time.perf_counter() - started)
    bound.info("webhook_" + result.status, state=result.state.value, completed=result.completed)
    return JSONResponse(
        {"status": result.status, "job_id": result.job_id, "state": result.state.value}
    )
