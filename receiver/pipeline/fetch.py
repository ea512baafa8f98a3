"""Results downloaded from (presigned) URLs: checked, streamed to disk, bounded and retried.

Each attempt connects through the URL policy (``URLPolicy.connect``: checked addresses only)
and runs its HTTP exchange on a thread of its own (``receiver.pipeline.download``); retries,
redirects, statuses and the atomic rename are decided here. Presigned URLs carry credentials in
their query string, so logs name the host only and errors the URL without its query
(``describe_url``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import random
import tempfile
import time
from glob import escape as glob_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import structlog

from receiver import tracing
from receiver.backoff import seconds_from
from receiver.completion import ResultInfo
from receiver.errors import (
    ChecksumError,
    FetchError,
    ResultDiskFullError,
    ResultTooLargeError,
    UnsafeURLError,
)
from receiver.pipeline import egress as outbound
from receiver.pipeline import failures
from receiver.pipeline.download import Exchange, Head, Interrupted, on_thread
from receiver.pipeline.urlsafety import URLPolicy, describe_url

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable, Callable, Mapping
    from types import TracebackType

    from receiver.config.settings import ResultsSettings

log = structlog.get_logger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
EXPIRED_STATUSES = frozenset({403, 404, 410})  # S3: 403 "Request has expired"
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


class _Transient(Exception):
    """One attempt failed in a way the next attempt may not."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class ResultFetcher:
    """Downloads results to files; ``tls`` replaces the process's TLS context (tests)."""

    def __init__(
        self,
        settings: ResultsSettings,
        *,
        policy: URLPolicy | None = None,
        tls: ssl.SSLContext | None = None,
        egress: outbound.Egress | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
    ) -> None:
        self.settings = settings
        self.policy = policy if policy is not None else URLPolicy.from_settings(settings)
        self._tls = tls
        self._egress = egress if egress is not None else outbound.current()
        self._sleep = sleep
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._retry_after_max = retry_after_max
        self._exchanges: set[Exchange] = set()
        self._closed = False
        self.bytes_fetched = 0
        """Bytes of every result downloaded in full (metric ``jobhook_result_bytes_fetched``)."""
        self.failures: collections.Counter[str] = collections.Counter()
        """Downloads given up, by code (metric ``jobhook_result_fetch_failures``)."""

    async def aclose(self) -> None:
        """Abort the downloads still running and start no more: each ends as a retryable
        FetchError (its completion is resolved again after a restart)."""
        self._closed = True
        for exchange in list(self._exchanges):
            exchange.abort()

    async def __aenter__(self) -> ResultFetcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def fetch(
        self,
        url: str,
        dest: Path,
        *,
        expected_sha256: str | None = None,
        attempts: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ResultInfo:
        """Download ``url`` to ``dest`` atomically; FetchError says ``expired`` or ``permanent``.

        ``attempts`` caps the tries below ``results.max_attempts`` (1 for a single-use result);
        ``headers`` go to ``url``'s origin only, never to where it redirects elsewhere.
        """
        try:
            parsed = self.policy.check_url(url)
        except UnsafeURLError as exc:
            self.failures[failures.fetch_code(exc)] += 1
            log.warning("result_url_refused", reason=str(exc))
            raise
        expected = expected_sha256.strip().lower() if expected_sha256 else None
        try:
            return await self._fetch(parsed, dest, expected, attempts, headers)
        except FetchError as exc:
            self.failures[failures.fetch_code(exc)] += 1
            if isinstance(exc, ResultDiskFullError):
                log.error("result_disk_full", dir=str(dest.parent), error=str(exc))
            raise

    async def _fetch(
        self,
        parsed: httpx.URL,
        dest: Path,
        expected: str | None,
        attempts: int | None,
        headers: Mapping[str, str] | None,
    ) -> ResultInfo:
        started = time.monotonic()
        tries = self.settings.max_attempts if attempts is None else attempts
        for attempt in range(1, tries + 1):
            try:
                info = await self._attempt(parsed, dest, expected, headers)
            except _Transient as exc:
                if self._closed:
                    raise FetchError("the result fetcher is shut down") from exc
                if attempt == tries:
                    raise FetchError(
                        f"fetching {describe_url(parsed)} failed {attempt} times: {exc.reason}",
                        retry_after=exc.retry_after,
                    ) from exc
                delay = self._delay(attempt, exc.retry_after)
                tracing.annotate({"jobhook.result.retries": attempt})
                log.info(
                    "result_fetch_retry",
                    host=parsed.host,
                    attempt=attempt,
                    delay=round(delay, 3),
                    reason=exc.reason,
                )
                await self._sleep(delay)
            except UnsafeURLError as exc:
                log.warning("result_url_refused", host=parsed.host, reason=str(exc))
                raise
            else:
                self.bytes_fetched += info.bytes
                seconds = round(time.monotonic() - started, 3)
                tracing.annotate(
                    {"server.address": parsed.host, "jobhook.result.retries": attempt - 1}
                )
                log.info(
                    "result_fetched",
                    host=parsed.host,
                    bytes=info.bytes,
                    sha256=info.sha256,
                    attempts=attempt,
                    seconds=seconds,
                )
                return info
        raise AssertionError("unreachable: max_attempts >= 1")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Retry-After when the server gave one, else exponential backoff with full jitter."""
        if retry_after is not None:
            return retry_after
        return random.uniform(0, min(self._backoff_max, self._backoff_base * 2 ** (attempt - 1)))

    async def _attempt(
        self,
        url: httpx.URL,
        dest: Path,
        expected: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> ResultInfo:
        """One try: follow up to MAX_REDIRECTS redirects, each target checked, then save."""
        origin = (url.scheme, url.host, url.port)
        for _ in range(MAX_REDIRECTS + 1):
            same = (url.scheme, url.host, url.port) == origin
            exchange, head = await self._open(url, headers if same else None)
            try:
                if head.status not in REDIRECT_STATUSES:
                    self._check_status(head, url.host)
                    return await self._save(exchange, head, url.host, dest, expected)
                url = _redirect_target(url, head)
            finally:
                self._exchanges.discard(exchange)
                exchange.close()
        raise FetchError(f"more than {MAX_REDIRECTS} redirects from {describe_url(url)}")

    async def _open(
        self, url: httpx.URL, headers: Mapping[str, str] | None = None
    ) -> tuple[Exchange, Head]:
        """Connect to a checked address of ``url``'s host, send the GET, read the head."""
        if self._closed:
            raise FetchError("the result fetcher is shut down")
        try:
            sock = await outbound.connect(
                self.policy, url, self.settings.connect_timeout, self._egress
            )
        except FetchError as exc:
            if exc.permanent:
                raise
            raise _Transient(str(exc)) from exc
        tls = (self._tls or self._egress.ssl_context) if url.scheme == "https" else None
        exchange = Exchange(sock, url, tls=tls, timeout=self.settings.read_timeout, headers=headers)
        self._exchanges.add(exchange)
        try:
            head = await on_thread(exchange.open, abort=exchange.abort)
        except BaseException as exc:
            self._exchanges.discard(exchange)
            exchange.close()
            if isinstance(exc, Interrupted):
                raise _Transient(str(exc)) from exc
            raise
        return exchange, head

    def _check_status(self, head: Head, host: str) -> None:
        status = head.status
        if 200 <= status < 300 and status != 206:
            return
        if status in EXPIRED_STATUSES:
            log.info("result_url_expired", host=host, status=status)
            raise FetchError(f"{host} answered {status}: the result URL has expired", expired=True)
        if status in (408, 429) or status >= 500:
            retry_after = seconds_from(head.header("retry-after"), cap=self._retry_after_max)
            raise _Transient(f"{host} answered {status}", retry_after)
        raise FetchError(f"{host} answered unexpected status {status}")

    async def _save(
        self, exchange: Exchange, head: Head, host: str, dest: Path, expected: str | None
    ) -> ResultInfo:
        """Stream the body to a temp file beside ``dest``, fsync, then rename it into place."""
        limit, length = self.settings.max_bytes, head.length
        if length is not None and length > limit:
            raise ResultTooLargeError(
                f"the result at {host} is {length} bytes, over results.max_bytes ({limit})"
            )
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        except OSError as exc:
            raise _write_error(dest, exc) from exc
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                try:
                    sha256, size = await on_thread(exchange.save, fh, limit, abort=exchange.abort)
                except Interrupted as exc:
                    raise _Transient(str(exc)) from exc
            if expected is not None and sha256 != expected:
                raise ChecksumError(
                    f"the result at {host} has sha256 {sha256}, expected {expected}"
                )
            os.replace(tmp, dest)
            await anyio.to_thread.run_sync(_fsync_dir, dest.parent)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise _write_error(dest, exc) from exc
            raise
        return ResultInfo(dest, sha256, size)


def _write_error(dest: Path, exc: OSError) -> FetchError:
    """A failed write as a FetchError: ResultDiskFullError when the filesystem is full."""
    message = f"cannot write the result to {dest}: {exc.strerror}"
    if exc.errno in NO_SPACE:
        return ResultDiskFullError(message)
    return FetchError(message)


def remove_partials(dest: Path) -> int:
    """Delete what interrupted downloads to ``dest`` left beside it; how many were deleted."""
    removed = 0
    for part in dest.parent.glob(f".{glob_escape(dest.name)}.*.part"):
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
            removed += 1
    return removed


def _fsync_dir(path: Path) -> None:
    """Make the rename durable; some platforms cannot open a directory, which is fine."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _redirect_target(url: httpx.URL, head: Head) -> httpx.URL:
    host, location = url.host, head.header("location")
    if not location:
        raise FetchError(f"{host} answered {head.status} without a Location")
    try:
        return url.join(location)
    except httpx.InvalidURL as exc:
        raise UnsafeURLError(f"{host} redirected to a malformed URL: {exc}") from None
