"""One result download on a thread of its own: each read hashed and written as it arrives.

The caller connects the socket (``URLPolicy.connect``: an address it checked, so nothing here
resolves a name) and runs ``Exchange.open`` and ``Exchange.save`` through ``on_thread``.
``http.client`` frames the request and the response; each ``read1`` takes what the socket has
(up to 1 MiB), which is hashed and written while it is still in the CPU's cache, away from the
event loop. A 1 GiB download over loopback in a fresh process, on 2 cores (MiB/s, medians of
6, interleaved): httpx under the event loop ~550 (h11 copies the body twice; every read is a
trip through httpcore, anyio and the loop); filling a 1 MiB buffer before hashing and writing
it, 593-616; handing filled buffers to a second thread, 633; this, 985; the plain-socket floor,
1,021 (``bench.floor_download``). In the slow ones the kernel's copy into the page cache of a
buffer no longer in cache took half the samples (perf: copy_folio_from_iter_atomic).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import os
import socket
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from receiver.errors import FetchError, ResultTooLargeError
from receiver.pipeline.urlsafety import default_port, scheme_port

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable
    from typing import BinaryIO

    import httpx

T = TypeVar("T")
BUFFER_BYTES = 1024 * 1024
"""The most one read takes, and one decode gives out."""
WRITEBACK_BYTES = 32 * 1024 * 1024
"""Bytes written between two starts of their writeback (``start_writeback``): a start is kernel
work in the saving thread, and with the body arriving on the other core every 4 MiB cost a
1 GiB download about half its speed in some runs (median of 10: 601 MiB/s every 4 MiB, 1,138
every 32, two threads then); dirty pages stay within a few tens of MiB either way."""
USER_AGENT = "jobhook"
_DONTNEED: int | None = getattr(os, "POSIX_FADV_DONTNEED", None)  # absent on macOS
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 seconds: close() resets the connection
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The content codings decoded, by zlib's ``wbits``: those httpx decoded here before."""


class Interrupted(Exception):
    """The exchange broke off in a way a new attempt may not: the connection, a timeout,
    a malformed response, a body cut short."""


@dataclass(frozen=True, slots=True)
class Head:
    """The response's status, headers (names looked up in any case) and Content-Length."""

    status: int
    headers: http.client.HTTPMessage
    length: int | None
    """None when the body is chunked or ends with the connection."""

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return None if value is None else str(value)


class _Connection(http.client.HTTPConnection):
    """``http.client`` over a socket the caller connected to a checked address."""

    def __init__(self, sock: socket.socket, host: str, port: int, default_port: int) -> None:
        super().__init__(host, port)
        self.default_port = default_port  # the Host header names the port only when it differs
        self.sock = sock

    def connect(self) -> None:
        # http.client reconnects on its own when the socket is gone: never to an unchecked one.
        raise http.client.NotConnected("the connection is closed")


class Exchange:
    """One GET over one connection; its methods block (run them with ``on_thread``), except
    ``abort``, which any thread may call to end a blocked one, and ``close``."""

    def __init__(
        self, sock: socket.socket, url: httpx.URL, *, tls: ssl.SSLContext | None, timeout: float
    ) -> None:
        self._url = url
        self._tls = tls
        self._timeout = timeout
        self._lock = threading.Lock()
        self._sock = sock
        self._aborted = False
        self._conn: _Connection | None = None
        self._response: http.client.HTTPResponse | None = None

    def open(self) -> Head:
        """TLS (when ``tls``), the request, the response's head: Interrupted when they fail."""
        url = self._url
        sock = self._sock
        try:
            sock.settimeout(self._timeout)  # blocking, each read or write waits at most this
            if self._tls is not None:
                sock = self._tls.wrap_socket(
                    sock, server_hostname=url.host, do_handshake_on_connect=False
                )
                self._swap(sock)
                sock.do_handshake()
            self._conn = _Connection(sock, url.host, default_port(url), scheme_port(url.scheme))
            target = url.raw_path.decode("ascii")
            headers = {"User-Agent": USER_AGENT, "Accept": "*/*", "Connection": "close"}
            self._conn.request("GET", target, headers=headers)  # Accept-Encoding: identity
            self._response = response = self._conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            raise Interrupted(self._why(exc)) from exc
        return Head(response.status, response.headers, response.length)

    def save(self, fh: BinaryIO, limit: int) -> tuple[str, int]:
        """The body into ``fh``, fsync'd: its sha256 and size. Interrupted when receiving
        fails; a failed write raises its OSError."""
        response = self._response
        assert response is not None, "open() first"
        output = _Output(
            fh, limit, _wbits(response.headers.get("content-encoding")), self._url.host
        )
        received = 0
        while True:
            try:
                data = response.read1(BUFFER_BYTES)
            except (OSError, http.client.HTTPException) as exc:
                raise Interrupted(self._why(exc)) from exc
            if not data:
                break
            received += len(data)
            output.keep(data)
        left = response.length  # http.client counts down a Content-Length as it reads
        if left:
            raise Interrupted(f"the connection closed after {received} of {received + left} bytes")
        output.finish()
        return output.digest.hexdigest(), output.size

    def abort(self) -> None:
        """End whatever ``open`` or ``save`` is waiting for: it raises Interrupted soon after."""
        with self._lock:
            self._aborted = True
            sock = self._sock
        with contextlib.suppress(OSError):
            # Linger 0: the close that follows resets the connection, so the server stops
            # sending now instead of waiting on a window that will not open again.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
            # socket's own shutdown, not SSLSocket's, which would pull the TLS state from under
            # a thread reading it: the reader sees the connection end, as when the peer ends it.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        """Release the connection; only once no thread runs ``open`` or ``save``."""
        if self._response is not None:
            self._response.close()
        if self._conn is not None:
            self._conn.close()
        self._sock.close()

    def _swap(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            aborted = self._aborted
        if aborted:
            raise Interrupted("aborted")

    def _why(self, exc: BaseException) -> str:
        if self._aborted:
            return "aborted"
        if isinstance(exc, TimeoutError):
            return f"no data from {self._url.host} for {self._timeout:g} s"
        detail = str(exc)
        return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


class _Output:
    """Decodes, counts, hashes and writes the body as it arrives; ``finish`` makes it durable."""

    def __init__(self, fh: BinaryIO, limit: int, wbits: int | None, host: str) -> None:
        self.digest = hashlib.sha256()
        self.size = 0
        self._fh = fh
        self._limit = limit
        self._host = host
        self._decoder = zlib.decompressobj(wbits) if wbits is not None else None
        self._unsynced = 0

    def keep(self, data: bytes) -> None:
        if self._decoder is None:
            self._write(data)
            return
        # Decoded a buffer at a time: a small body that inflates without end is refused at the
        # limit, never held whole.
        chunk: Any = data
        while chunk:
            try:
                plain = self._decoder.decompress(chunk, BUFFER_BYTES)
            except zlib.error as exc:
                raise FetchError(f"the result at {self._host} cannot be decoded: {exc}") from None
            self._write(plain)
            chunk = self._decoder.unconsumed_tail

    def finish(self) -> None:
        if self._decoder is not None:
            self._write(self._decoder.flush())
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def _write(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        if self.size > self._limit:
            raise ResultTooLargeError(
                f"the result at {self._host} exceeds results.max_bytes ({self._limit})"
            )
        self.digest.update(data)
        self._fh.write(data)
        self._unsynced += len(data)
        if self._unsynced >= WRITEBACK_BYTES:
            start_writeback(self._fh, self._unsynced)
            self._unsynced = 0


def _wbits(content_encoding: str | None) -> int | None:
    """How to decode a body sent with ``content_encoding``; None to keep it as sent.

    The request asks for ``identity``; a server that compresses anyway (an object stored with
    ``Content-Encoding: gzip``) gets its gzip or deflate decoded, as httpx did. Other codings
    are kept as sent, as httpx kept those it had no decoder for.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    return _DECODERS.get(codings[0]) if len(codings) == 1 else None


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


async def on_thread(fn: Callable[..., T], *args: Any, abort: Callable[[], None]) -> T:
    """``fn(*args)`` on a thread of its own; when the caller is cancelled, ``abort()`` ends it
    and the cancellation waits for it, so nothing ``fn`` uses is released under it.

    A thread per call, not the loop's executor: a download holds its thread for as long as it
    takes, and the executor's few workers are shared with DNS lookups and file work.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            outcome: tuple[Any, BaseException | None] = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, done, *outcome)

    threading.Thread(target=run, name="jobhook-download", daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        abort()
        while not done.done():  # wait() never raises the outcome: this stays a cancellation
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([done])
        if not done.cancelled():
            done.exception()  # retrieved: its outcome no longer matters
        raise


def _settle(future: asyncio.Future[T], result: T, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
