"""The ``redis`` handler: XADD each completion to a Redis stream (extra ``jobhook[redis]``).

Every entry has two fields: ``id``, the completion's stable message id (the same on every
retry, so consumers de-duplicate on it), and ``completion``, the completion JSON. ``maxlen``
trims the stream approximately (``MAXLEN ~``). A failed XADD raises; the client reconnects on
the next attempt, so a Redis restart costs retries, never a completion.
"""

from __future__ import annotations

import hashlib
import importlib
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import structlog

from receiver.errors import RetryableError
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.typing import EncodableT, FieldT

    from receiver.completion import Completion

log = structlog.get_logger("handlers.redis")

DEFAULT_URL = "redis://127.0.0.1:6379/0"
SCHEMES = ("redis", "rediss", "unix")
INSTALL_HINT = "install jobhook[redis] (uv sync --extra redis)"


class RedisHandler:
    """Appends each completion to ``stream``; raises when Redis does not confirm the XADD."""

    def __init__(
        self,
        name: str,
        stream: str,
        url: str | Secret = DEFAULT_URL,
        maxlen: int | None = None,
        timeout: float = 5.0,
    ) -> None:
        _require_extra()
        self.name = name
        if not isinstance(stream, str) or not stream:
            raise ValueError("'stream' must be a non-empty string (the stream's key)")
        self.stream = stream
        if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int)):
            raise ValueError("'maxlen' must be a positive integer")
        if maxlen is not None and maxlen < 1:
            raise ValueError("'maxlen' must be a positive integer")
        self.maxlen = maxlen
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError("'timeout' must be a positive number of seconds")
        self.timeout = float(timeout)
        self._url = _resolve_url(url)
        self.display_url = _display(self._url.reveal())
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
            "id": dedupe_id(completion.message_id),
            "completion": completion.to_json(),
        }
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
        if str(exc):
            text = f"{type(exc).__name__}: {exc}"
        elif isinstance(exc, TimeoutError):
            text = f"TimeoutError: no answer within {self.timeout}s"
        else:
            text = type(exc).__name__
        return _scrub(text, self._url)


def _require_extra() -> None:
    try:
        importlib.import_module("redis.asyncio")
    except ImportError as exc:
        raise ImportError(f"the redis handler needs the 'redis' package: {INSTALL_HINT}") from exc


def _resolve_url(url: str | Secret) -> Secret:
    """``url`` may be a literal, ``env:NAME`` or ``file:PATH``; errors never echo it."""
    if isinstance(url, Secret):
        value = url.reveal()
    elif isinstance(url, str):
        try:
            value = resolve_secret(url)
        except ValueError as exc:
            raise ValueError(f"'url': {exc}") from None
    else:
        raise ValueError("'url' must be a string: a literal, 'env:NAME' or 'file:PATH'")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError("'url' is not a valid URL") from None
    if parts.scheme not in SCHEMES:
        raise ValueError("'url' must be a redis://, rediss:// or unix:// URL")
    return Secret(value)


def _display(url: str) -> str:
    """The URL without credentials or query string, for messages and logs."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path}"


def _scrub(text: str, url: Secret) -> str:
    """``text`` with the URL's password blanked out, should a client library ever echo it."""
    password = urlsplit(url.reveal()).password
    if password:
        text = text.replace(password, "***").replace(unquote(password), "***")
    return text


def dedupe_id(message_id: str) -> str:
    """The completion's message id, or a stable ``jh_`` hash of it when it cannot travel as-is.

    The same rule in every queue handler: at most 255 bytes of UTF-8, no control characters.
    """
    try:
        size = len(message_id.encode("utf-8"))
    except UnicodeEncodeError:
        size = 256
    if size <= 255 and message_id.isprintable():
        return message_id
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()
    return "jh_" + digest[:40]
