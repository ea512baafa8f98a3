"""The ``redis`` handler: XADD each completion to a Redis stream (extra ``jobhook[redis]``).

Every entry has two fields: ``id``, the completion's ``delivery_id`` (the same on every retry
and as the http handler's ``webhook-id``, so consumers de-duplicate on it), and ``completion``,
the completion JSON. ``maxlen`` trims the stream approximately (``MAXLEN ~``). A failed XADD
raises; the client reconnects on the next attempt, so a Redis restart costs retries, never a
completion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import structlog
from pydantic import Field, Strict, field_validator

from handlers import broker
from handlers.options import HandlerOptions, NonEmpty, Seconds, SecretText
from receiver import tracing
from receiver.errors import RetryableError
from receiver.pipeline.urlsafety import describe_url

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.typing import EncodableT, FieldT

    from receiver.completion import Completion
    from receiver.secret import Secret

log = structlog.get_logger("handlers.redis")

DEFAULT_URL = "redis://127.0.0.1:6379/0"
SCHEMES = ("redis", "rediss", "unix")


class RedisOptions(HandlerOptions):
    stream: NonEmpty
    """The stream's key."""
    url: SecretText = Field(DEFAULT_URL, validate_default=True)
    """A redis://, rediss:// or unix:// URL; it may carry a password: best as ``env:NAME``."""
    maxlen: Annotated[int, Strict(), Field(ge=1)] | None = None
    """Trim the stream to about this many entries (``MAXLEN ~``)."""
    timeout: Seconds = 5.0

    @field_validator("url")
    @classmethod
    def _redis_url(cls, url: Secret) -> Secret:
        if broker.parse_url(url.reveal(), "is not a valid URL").scheme not in SCHEMES:
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return url


class RedisHandler:
    """Appends each completion to ``stream``; raises when Redis does not confirm the XADD."""

    options_model = RedisOptions

    def __init__(self, name: str, **options: Any) -> None:
        broker.require_extra("redis.asyncio", "redis", "redis")
        self.name = name
        checked = RedisOptions.parse(options)
        self.stream, self.maxlen, self.timeout = checked.stream, checked.maxlen, checked.timeout
        self._url = checked.url
        self.display_url = describe_url(self._url.reveal(), 6379, default_host="localhost")
        self._client: Redis | None = None

    def __repr__(self) -> str:
        return (
            f"RedisHandler(name={self.name!r}, url={self.display_url!r}, "
            f"stream={self.stream!r}, maxlen={self.maxlen!r})"
        )

    async def start(self) -> None:
        """Create the client and check Redis answers; if it does not, deliveries retry later."""
        from redis.exceptions import RedisError

        client = self._connect()
        try:
            await client.ping()
        except (RedisError, OSError) as exc:
            log.warning(
                "redis_unavailable",
                handler=self.name,
                url=self.display_url,
                error=self._describe(exc),
            )

    async def close(self) -> None:
        """Close the client and its connections; a later ``handle`` opens new ones."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def handle(self, completion: Completion) -> None:
        """XADD the completion; RetryableError when Redis is unreachable or refuses it."""
        from redis.exceptions import RedisError

        client = self._connect()
        fields: dict[FieldT, EncodableT] = {
            "id": completion.delivery_id,
            "completion": completion.to_json(),
        }
        with tracing.span(f"xadd {self.stream}", kind="producer", attributes={
            "messaging.system": "redis", "messaging.operation.type": "send",
            "messaging.operation.name": "xadd", "messaging.destination.name": self.stream,
            "messaging.message.id": completion.delivery_id,
        }):  # fmt: skip
            fields.update(tracing.headers())  # traceparent/tracestate fields beside the entry's
            try:
                entry = await client.xadd(self.stream, fields, maxlen=self.maxlen, approximate=True)
            except (RedisError, OSError) as exc:
                raise RetryableError(
                    f"XADD to stream {self.stream!r} on {self.display_url} failed: "
                    f"{self._describe(exc)}"
                ) from exc
        log.debug(
            "redis_published",
            handler=self.name,
            job_id=completion.job_id,
            stream=self.stream,
            entry=entry.decode() if isinstance(entry, bytes) else entry,
        )

    def _connect(self) -> Redis:
        """The client (connections are opened lazily and reopened after a failure)."""
        if self._client is None:
            from redis.asyncio import Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            # A connection that breaks mid-command is retried once, at once; anything longer
            # is the dispatcher's backoff. (Stale pooled connections are replaced on checkout.)
            self._client = Redis.from_url(
                self._url.reveal(),
                socket_connect_timeout=self.timeout,
                socket_timeout=self.timeout,
                retry=Retry(NoBackoff(), 1),
            )
        return self._client

    def _describe(self, exc: BaseException) -> str:
        return broker.describe(exc, self.timeout, [self._url])
