"""Results downloaded from (presigned) URLs: checked, streamed to disk, bounded and retried.

Presigned URLs carry credentials in their query string, so logs name the host only and errors
the URL without its query (``describe_url``).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import os
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import httpx
import structlog

from receiver.completion import ResultInfo
from receiver.errors import FetchError, ResultTooLargeError, UnsafeURLError
from receiver.urlsafety import URLPolicy, describe_url, guarded_transport

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from receiver.config import ResultsSettings

log = structlog.get_logger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
EXPIRED_STATUSES = frozenset({403, 404, 410})  # S3: 403 "Request has expired"
_FLUSH_BYTES = 4 * 1024 * 1024  # per hand-over to the writer thread: fewer, larger, and cheaper
_DONTNEED: int | None = getattr(os, "POSIX_FADV_DONTNEED", None)  # absent on macOS


class _Transient(Exception):
    """One attempt failed in a way the next attempt may not."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def make_client(settings: ResultsSettings, policy: URLPolicy) -> httpx.AsyncClient:
    """The results client: guarded connections, redirects left to the fetcher, no env proxies."""
    timeout = httpx.Timeout(
        connect=settings.connect_timeout,
        read=settings.read_timeout,
        write=settings.read_timeout,
        pool=settings.connect_timeout,
    )
    # trust_env=False: a proxy from HTTP(S)_PROXY would be the peer instead of the checked host.
    return httpx.AsyncClient(
        transport=guarded_transport(policy),
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": "identity"},
    )


class ResultFetcher:
    """Downloads results to files; a client passed in must come from ``make_client``."""

    def __init__(
        self,
        settings: ResultsSettings,
        *,
        policy: URLPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
    ) -> None:
        self.settings = settings
        self.policy = policy if policy is not None else URLPolicy.from_settings(settings)
        self._owns_client = client is None
        self._client = client if client is not None else make_client(settings, self.policy)
        self._sleep = sleep
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._retry_after_max = retry_after_max
        self.bytes_fetched = 0
        """Bytes of every result downloaded in full (metric ``jobhook_result_bytes_fetched``)."""

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

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
        self, url: str, dest: Path, *, expected_sha256: str | None = None
    ) -> ResultInfo:
        """Download ``url`` to ``dest`` atomically; FetchError says ``expired`` or ``permanent``."""
        try:
            parsed = self.policy.check_url(url)
        except UnsafeURLError as exc:
            log.warning("result_url_refused", reason=str(exc))
            raise
        expected = expected_sha256.strip().lower() if expected_sha256 else None
        started = time.monotonic()
        for attempt in range(1, self.settings.max_attempts + 1):
            try:
                info = await self._attempt(parsed, dest, expected)
            except _Transient as exc:
                if attempt == self.settings.max_attempts:
                    raise FetchError(
                        f"fetching {describe_url(parsed)} failed {attempt} times: {exc.reason}",
                        retry_after=exc.retry_after,
                    ) from exc
                delay = self._delay(attempt, exc.retry_after)
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

    async def _attempt(self, url: httpx.URL, dest: Path, expected: str | None) -> ResultInfo:
        """One try: follow up to MAX_REDIRECTS redirects, each target checked, then save."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                await self.policy.check(url)
            except FetchError as exc:
                if exc.permanent:
                    raise
                raise _Transient(str(exc)) from exc
            try:
                response = await self._client.send(
                    self._client.build_request("GET", url), stream=True
                )
            except httpx.TransportError as exc:
                raise _Transient(_describe(exc)) from exc
            try:
                if response.status_code not in REDIRECT_STATUSES:
                    self._check_status(response)
                    return await self._save(response, dest, expected)
                url = _redirect_target(response)
            finally:
                await response.aclose()
        raise FetchError(f"more than {MAX_REDIRECTS} redirects from {describe_url(url)}")

    def _check_status(self, response: httpx.Response) -> None:
        status, host = response.status_code, response.url.host
        if response.is_success and status != 206:
            return
        if status in EXPIRED_STATUSES:
            log.info("result_url_expired", host=host, status=status)
            raise FetchError(f"{host} answered {status}: the result URL has expired", expired=True)
        if status in (408, 429) or status >= 500:
            retry_after = _retry_after(response.headers.get("retry-after"), self._retry_after_max)
            raise _Transient(f"{host} answered {status}", retry_after)
        raise FetchError(f"{host} answered unexpected status {status}")

    async def _save(self, response: httpx.Response, dest: Path, expected: str | None) -> ResultInfo:
        """Stream the body to a temp file beside ``dest``, fsync, then rename it into place."""
        limit, host = self.settings.max_bytes, response.url.host
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise ResultTooLargeError(
                f"the result at {host} is {length} bytes, over results.max_bytes ({limit})"
            )
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
        except OSError as exc:
            raise FetchError(f"cannot write the result to {dest}: {exc.strerror}") from exc
        tmp = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                sha256, size = await self._stream_to(response, fh, limit)
                await anyio.to_thread.run_sync(os.fsync, fh.fileno())
            if expected is not None and sha256 != expected:
                raise FetchError(f"the result at {host} has sha256 {sha256}, expected {expected}")
            os.replace(tmp, dest)
            await anyio.to_thread.run_sync(_fsync_dir, dest.parent)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise FetchError(f"cannot write the result to {dest}: {exc.strerror}") from exc
            raise
        return ResultInfo(dest, sha256, size)

    async def _stream_to(
        self, response: httpx.Response, fh: BinaryIO, limit: int
    ) -> tuple[str, int]:
        """Hash and write the body in ~4 MiB batches in a worker thread while the next batch
        arrives: one batch being written, one filling, never the whole body.

        Receiving, hashing and writing one after the other ran at about a third of curl's
        speed on loopback (``bench large``); overlapped, the slower of the two sets the pace.
        """
        digest, size = hashlib.sha256(), 0
        batch: list[bytes] = []
        batched = 0
        writing: asyncio.Future[None] | None = None
        loop = asyncio.get_running_loop()
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ResultTooLargeError(
                        f"the result at {response.url.host} exceeds results.max_bytes ({limit})"
                    )
                batch.append(chunk)
                batched += len(chunk)
                if batched >= _FLUSH_BYTES:
                    if writing is not None:
                        await writing  # batches reach the hash and the file in order
                    writing = loop.run_in_executor(None, _write, fh, digest, batch)
                    batch, batched = [], 0
            if writing is not None:
                await writing
            writing = None
        except httpx.TransportError as exc:
            raise _Transient(_describe(exc)) from exc
        except httpx.DecodingError as exc:
            raise FetchError(f"the result at {response.url.host} cannot be decoded") from exc
        finally:
            if writing is not None:
                # Stopped early (an error, a cancellation): the batch in the worker ends on its
                # own (closing the file waits for it) and its outcome no longer matters.
                writing.add_done_callback(_discard_outcome)
        await loop.run_in_executor(None, _write, fh, digest, batch)
        fh.flush()
        return digest.hexdigest(), size


def _write(fh: BinaryIO, digest: Any, chunks: list[bytes]) -> None:
    written = 0
    for chunk in chunks:
        digest.update(chunk)
        fh.write(chunk)
        written += len(chunk)
    start_writeback(fh, written)


def start_writeback(fh: BinaryIO, written: int) -> None:
    """Send the ``written`` bytes just written on to the disk now, not at the final fsync.

    Left alone, the kernel keeps a result's pages dirty until the fsync (its background
    writeback starts only at ``dirty_background_ratio`` of memory), so the disk idles while the
    body arrives and then writes all of it at the end. ``POSIX_FADV_DONTNEED`` on dirty pages
    starts their writeback (Linux); pages still being written are not dropped, so the result
    stays cached for a handler that reads it next, only clean. The disk works while the
    download runs (1 GiB written from memory and fsync'd: about 320-530 MiB/s left alone,
    590-870 with this, on this project's VM), and a multi-GiB result does not fill a sidecar's
    memory limit with dirty pages, which the kernel cannot drop. Advice only: where it is
    missing or refused, nothing changes.
    """
    if written <= 0 or _DONTNEED is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fh.flush()
        end = fh.tell()
        os.posix_fadvise(fh.fileno(), end - written, written, _DONTNEED)


def _discard_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _fsync_dir(path: Path) -> None:
    """Make the rename durable; some platforms cannot open a directory, which is fine."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _redirect_target(response: httpx.Response) -> httpx.URL:
    host, location = response.url.host, response.headers.get("location")
    if not location:
        raise FetchError(f"{host} answered {response.status_code} without a Location")
    try:
        return response.url.join(location)
    except httpx.InvalidURL as exc:
        raise UnsafeURLError(f"{host} redirected to a malformed URL: {exc}") from None


def _retry_after(value: str | None, cap: float) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), capped; None when absent or bad."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), cap)


def _describe(exc: httpx.TransportError) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
