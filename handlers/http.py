"""The ``http`` handler: POST the completion document to a URL, optionally signed.

With a ``secret`` (a ``whsec_`` Standard Webhooks secret, literal, ``env:NAME`` or
``file:PATH``) every request carries ``webhook-id`` (``Completion.delivery_id``, the same on
every retry and in the queue handlers' messages), ``webhook-timestamp`` and
``webhook-signature``, signed by svix, so the receiver can verify it with any Standard Webhooks
library. 2xx is done; anything else raises.

``timeout`` bounds each step (connect, each write, each read, waiting for a pooled connection);
``deadline`` bounds the whole attempt, so a destination that trickles its answer a byte at a
time, resetting every per-read timer, still gives up the dispatcher's slot in time.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import structlog
from pydantic import BeforeValidator, field_validator

# svix.webhooks.Webhook only delegates to standardwebhooks' Webhook (svix's own dependency);
# importing it runs svix/__init__, which loads svix's whole REST API client (~0.4 s of every
# start) for nothing sent here. receiver/signatures/svix.py imports the same class for the same
# reason; tests/handlers/test_http.py checks the signature with svix's own verifier.
from standardwebhooks.webhooks import Webhook

from handlers.options import SECRET_TABLE, HandlerOptions, Seconds, SecretText
from receiver import tracing
from receiver.backoff import retry_after
from receiver.config.settings import check_svix_secret
from receiver.errors import DeliveryError
from receiver.pipeline import egress, failures
from receiver.pipeline.urlsafety import describe_url
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from receiver.completion import Completion

log = structlog.get_logger("handlers.http")

EXCERPT_BYTES = 512
USER_AGENT = "jobhook"
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _resolve_headers(headers: object) -> dict[str, Secret]:
    """Header values may be secrets (``env:NAME`` / ``file:PATH``): kept hidden until sent."""
    if not isinstance(headers, Mapping):
        raise ValueError("must be a table of header names to values")
    resolved: dict[str, Secret] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError("names and values must be strings")
        if not _TOKEN.match(key):
            raise ValueError(f"invalid header name {key!r}")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"header {key!r} has a line break or NUL in its value")
        try:
            resolved[key.lower()] = Secret(resolve_secret(value))
        except ValueError as exc:
            raise ValueError(f"header {key!r}: {exc}") from None
    return resolved


class HttpOptions(HandlerOptions):
    url: str
    """The http:// or https:// URL to POST to."""
    secret: SecretText | None = None
    """A ``whsec_`` Standard Webhooks secret: requests are signed with it."""
    timeout: Seconds = 10.0
    """Each step of an attempt: connect, write, read, wait for a pooled connection."""
    deadline: Seconds = 30.0
    """The whole attempt, from connecting to the last byte of the answer."""
    headers: Annotated[dict[str, Secret], BeforeValidator(_resolve_headers), SECRET_TABLE] = {}
    """Extra request headers; a value may be a secret (``env:NAME`` / ``file:PATH``)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ValueError(f"is not a valid URL: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            # The URL itself is not echoed: it may carry credentials.
            raise ValueError("must be an http:// or https:// URL with a host")
        if any(c.isspace() for c in url) or not 0 < (parsed.port or 80) < 65536:
            raise ValueError("is not a valid URL (whitespace or a port out of range)")
        return url

    @field_validator("secret")
    @classmethod
    def _standard_webhooks_secret(cls, secret: Secret | None) -> Secret | None:
        if secret is None:
            return None
        if not secret.reveal().startswith("whsec_"):
            raise ValueError("must be a Standard Webhooks secret starting with 'whsec_'")
        try:
            check_svix_secret(secret.reveal())
        except ValueError as exc:
            raise ValueError(f"is invalid: {str(exc).replace('secret #0 ', '')}") from None
        return secret


class HttpHandler:
    """POSTs ``completion.to_json()`` to ``url``; a non-2xx answer or a network error raises."""

    options_model = HttpOptions

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        checked = HttpOptions.parse(options)
        self.url = checked.url
        self.timeout = checked.timeout
        self.deadline = checked.deadline
        self._webhook = Webhook(checked.secret.reveal()) if checked.secret is not None else None
        self._headers = checked.headers
        self._client: httpx.AsyncClient | None = None
        url = httpx.URL(self.url)  # HTTP client conventions; url.full without userinfo or query
        self._span_attributes: dict[str, str | int] = {
            "http.request.method": "POST",
            "server.address": url.host,
            "server.port": url.port or (443 if url.scheme == "https" else 80),
            "url.full": describe_url(self.url, default_path="/"),
        }

    def __repr__(self) -> str:
        return (
            f"HttpHandler(name={self.name!r}, url={describe_url(self.url, default_path='/')!r}, "
            f"signed={self._webhook is not None})"
        )

    async def start(self) -> None:
        """Open the handler's one HTTP client."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout,
                follow_redirects=False,
                headers={"user-agent": USER_AGENT},
                **egress.current().client_options(),
            )

    async def close(self) -> None:
        """Close the HTTP client; a later ``handle`` opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def handle(self, completion: Completion) -> None:
        """POST the completion; raise RetryableError unless the answer is 2xx."""
        if self._client is None:
            await self.start()
        assert self._client is not None
        body = completion.to_json()
        headers = {key: value.reveal() for key, value in self._headers.items()}
        headers["content-type"] = "application/json"
        if self._webhook is not None:
            headers.update(self._signature_headers(completion.delivery_id, body))
        target = describe_url(self.url, default_path="/")
        with tracing.span("POST", kind="client", attributes=self._span_attributes) as span:
            headers.update(tracing.headers())  # traceparent/tracestate: the downstream joins in
            try:
                async with (
                    asyncio.timeout(self.deadline) as deadline,
                    self._client.stream("POST", self.url, content=body, headers=headers) as r,
                ):
                    span.set("http.response.status_code", r.status_code)
                    if not r.is_success:
                        answered = f"POST {target} answered {r.status_code}"
                        raise DeliveryError(
                            f"{answered}: {await _excerpt(r)!r}",
                            code=failures.http_code(r.status_code),
                            summary=answered,
                            retry_after=retry_after(r.headers),
                        )
            except TimeoutError as exc:
                if not deadline.expired():
                    raise
                late = f"POST {target} did not finish within its {self.deadline}s deadline"
                raise DeliveryError(late, code="timeout", summary=late) from exc
            except httpx.TimeoutException as exc:
                timed_out = f"POST {target} timed out after {self.timeout}s"
                raise DeliveryError(timed_out, code="timeout", summary=timed_out) from exc
            except httpx.HTTPError as exc:
                failed = f"POST {target} failed: {type(exc).__name__}"
                code = "connect_error" if isinstance(exc, httpx.ConnectError) else "http_error"
                raise DeliveryError(f"{failed}: {exc}", code=code, summary=failed) from exc
        log.debug("http_delivered", handler=self.name, job_id=completion.job_id,
                  status=r.status_code)  # fmt: skip

    def _signature_headers(self, webhook_id: str, body: bytes) -> dict[str, str]:
        assert self._webhook is not None
        timestamp = int(time.time())
        signature = self._webhook.sign(
            webhook_id, datetime.fromtimestamp(timestamp, tz=UTC), body.decode("utf-8")
        )
        return {
            "webhook-id": webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature,
        }


async def _excerpt(response: httpx.Response) -> str:
    data = b""
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= EXCERPT_BYTES:
            break
    return data[:EXCERPT_BYTES].decode("utf-8", "replace")
