"""The ``nats`` handler: publish each completion to NATS JetStream (extra ``jobhook[nats]``).

The message body is the completion JSON; its ``Nats-Msg-Id`` header is the completion's
``delivery_id`` (the same on every retry and as the http handler's ``webhook-id``), so
JetStream's duplicate window drops a retry whose first attempt was stored but not acknowledged.
``handle`` returns only once JetStream has acknowledged the message. With ``stream`` set, that
stream is created (or given the subject) whenever the handler connects. The client reconnects in
the background; while it is disconnected, publishing raises at once (nothing is buffered), and a
client that gave up is replaced on the next attempt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import TYPE_CHECKING, Annotated, Any

import structlog
from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator

from handlers import broker
from handlers.options import STRINGS_SCHEMA, HandlerOptions, Seconds
from receiver import tracing
from receiver.errors import RetryableError
from receiver.pipeline.urlsafety import describe_url
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js import JetStreamContext

    from receiver.completion import Completion

log = structlog.get_logger("handlers.nats")

DEFAULT_SERVERS = "nats://127.0.0.1:4222"
SCHEMES = ("nats", "tls", "ws", "wss")
MSG_ID_HEADER = "Nats-Msg-Id"
RECONNECT_WAIT_SECONDS = 1
_BAD_SUBJECT_CHARS = frozenset(" \t\r\n*>")
_BAD_STREAM_CHARS = frozenset(" \t\r\n.*>/\\")


def _resolve_servers(servers: object) -> list[Secret]:
    """Each server URL may be a literal, ``env:NAME`` or ``file:PATH``; errors never echo it."""
    items = [servers] if isinstance(servers, str) else servers
    if not isinstance(items, list | tuple) or not items:
        raise ValueError("must be a URL or a list of URLs")
    resolved = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError("must be a URL or a list of URLs")
        value = resolve_secret(item)
        parts = broker.parse_url(value, "has an invalid URL", default_scheme="nats")
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError("must be nats://, tls://, ws:// or wss:// URLs with a host")
        resolved.append(Secret(value))
    return resolved


class NatsOptions(HandlerOptions):
    subject: str
    """Dot-separated tokens, no wildcards."""
    servers: Annotated[
        list[Secret], BeforeValidator(_resolve_servers), WithJsonSchema(STRINGS_SCHEMA)
    ] = Field(DEFAULT_SERVERS, validate_default=True)
    """One server URL or a list; each may be ``env:NAME`` or ``file:PATH`` (credentials)."""
    stream: str | None = None
    """A JetStream stream to create (or give the subject) on connecting."""
    timeout: Seconds = 5.0

    @field_validator("subject")
    @classmethod
    def _plain_subject(cls, subject: str) -> str:
        if not subject:
            raise ValueError("must be a non-empty string")
        if _BAD_SUBJECT_CHARS.intersection(subject) or "" in subject.split("."):
            raise ValueError(
                f"{subject!r} must be dot-separated tokens without spaces or wildcards"
            )
        return subject

    @field_validator("stream")
    @classmethod
    def _stream_name(cls, stream: str | None) -> str | None:
        if stream is not None and (not stream or _BAD_STREAM_CHARS.intersection(stream)):
            raise ValueError("must be a stream name without spaces, '.', '*', '>' or '/'")
        return stream


class NatsHandler:
    """Publishes each completion to ``subject`` and waits for JetStream's acknowledgement."""

    options_model = NatsOptions

    def __init__(self, name: str, **options: Any) -> None:
        broker.require_extra("nats.js", "nats", "nats-py")
        self.name = name
        checked = NatsOptions.parse(options)
        self.subject, self.stream, self.timeout = checked.subject, checked.stream, checked.timeout
        self._servers = checked.servers
        self.display_servers = [describe_url(s.reveal(), 4222) for s in self._servers]
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._stream_ready = False
        self._lock = asyncio.Lock()
        self._last_error = ""

    def __repr__(self) -> str:
        return (
            f"NatsHandler(name={self.name!r}, servers={self.display_servers!r}, "
            f"subject={self.subject!r}, stream={self.stream!r})"
        )

    async def start(self) -> None:
        """Connect (and set up ``stream``); if NATS is down, deliveries retry and reconnect."""
        try:
            await self._ready()
        except RetryableError as exc:
            log.warning("nats_unavailable", handler=self.name, error=str(exc))

    async def close(self) -> None:
        """Close the connection; a later ``handle`` opens a new one."""
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            await nc.close()

    async def handle(self, completion: Completion) -> None:
        """Publish and wait for the ack; RetryableError when it does not come."""
        from nats.errors import Error as NatsError
        from nats.js.errors import NoStreamResponseError

        js = await self._ready()
        with tracing.span(f"publish {self.subject}", kind="producer", attributes={
            "messaging.system": "nats", "messaging.operation.type": "send",
            "messaging.operation.name": "publish", "messaging.destination.name": self.subject,
            "messaging.message.id": completion.delivery_id,
        }):  # fmt: skip
            try:
                ack = await js.publish(
                    self.subject,
                    completion.to_json(),
                    timeout=self.timeout,
                    stream=self.stream,
                    headers={MSG_ID_HEADER: completion.delivery_id, **tracing.headers()},
                )
            except NoStreamResponseError as exc:
                raise RetryableError(
                    f"no JetStream stream takes subject {self.subject!r} on {self._where}: "
                    "create one, or set 'stream' to have jobhook create it"
                ) from exc
            except (NatsError, OSError, TimeoutError) as exc:
                raise RetryableError(
                    f"publishing to {self.subject!r} on {self._where} failed: {self._describe(exc)}"
                ) from exc
        log.debug(
            "nats_published",
            handler=self.name,
            job_id=completion.job_id,
            stream=ack.stream,
            seq=ack.seq,
            duplicate=bool(ack.duplicate),
        )

    @property
    def _where(self) -> str:
        return ", ".join(self.display_servers)

    async def _ready(self) -> JetStreamContext:
        """The JetStream context of a live connection (made now if there is none)."""
        async with self._lock:
            if self._nc is None or self._nc.is_closed:
                self._nc, self._js = None, None
                self._nc = await self._connect()
                self._js = self._nc.jetstream(timeout=self.timeout)
                self._stream_ready = False
            if not self._nc.is_connected:
                raise RetryableError(
                    f"NATS at {self._where} is not connected (reconnecting in the background)"
                    + (f"; last error: {self._last_error}" if self._last_error else "")
                )
            assert self._js is not None
            if self.stream is not None and not self._stream_ready:
                await self._ensure_stream(self._js, self.stream)
                self._stream_ready = True
            return self._js

    async def _connect(self) -> Client:
        from nats.aio.client import Client
        from nats.errors import Error as NatsError

        nc = Client()
        self._last_error = ""
        try:
            # With unlimited reconnects the first connect retries until it works: bounded here.
            async with asyncio.timeout(self.timeout):
                await nc.connect(
                    servers=[s.reveal() for s in self._servers],
                    name=f"jobhook {self.name}",
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=RECONNECT_WAIT_SECONDS,
                    connect_timeout=max(1, math.ceil(self.timeout)),
                    error_cb=self._on_error,
                    disconnected_cb=self._on_disconnected,
                    reconnected_cb=self._on_reconnected,
                )
        except (NatsError, OSError, TimeoutError) as exc:
            await nc.close()
            reason = self._last_error or self._describe(exc)
            raise RetryableError(f"connecting to NATS at {self._where} failed: {reason}") from exc
        except BaseException:
            await nc.close()
            raise
        log.info("nats_connected", handler=self.name, servers=self.display_servers)
        return nc

    async def _ensure_stream(self, js: JetStreamContext, stream: str) -> None:
        """Create ``stream`` for the subject, or add the subject to it when it lacks it."""
        from nats.errors import Error as NatsError
        from nats.js.errors import NotFoundError

        try:
            try:
                info = await js.stream_info(stream)
            except NotFoundError:
                await js.add_stream(name=stream, subjects=[self.subject])
                log.info(
                    "nats_stream_created", handler=self.name, stream=stream, subject=self.subject
                )
                return
            subjects = list(info.config.subjects or [])
            if not any(subject_matches(pattern, self.subject) for pattern in subjects):
                config = dataclasses.replace(info.config, subjects=[*subjects, self.subject])
                await js.update_stream(config)
                log.info(
                    "nats_stream_updated", handler=self.name, stream=stream, subject=self.subject
                )
        except (NatsError, OSError, TimeoutError) as exc:
            raise RetryableError(
                f"setting up JetStream stream {stream!r} for {self.subject!r} on {self._where} "
                f"failed: {self._describe(exc)}"
            ) from exc

    async def _on_error(self, exc: Exception) -> None:
        error = self._describe(exc)
        if error != self._last_error:  # one event per outage, not one per reconnect attempt
            log.warning("nats_error", handler=self.name, error=error)
        self._last_error = error

    async def _on_disconnected(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            log.warning("nats_disconnected", handler=self.name)

    async def _on_reconnected(self) -> None:
        self._last_error = ""
        log.info("nats_reconnected", handler=self.name)

    def _describe(self, exc: BaseException) -> str:
        return broker.describe(exc, self.timeout, self._servers)


def subject_matches(pattern: str, subject: str) -> bool:
    """True when the subject ``pattern`` (``*`` one token, ``>`` the rest) covers ``subject``."""
    want, have = pattern.split("."), subject.split(".")
    for index, part in enumerate(want):
        if part == ">":
            return len(have) > index
        if index >= len(have) or part not in ("*", have[index]):
            return False
    return len(want) == len(have)
