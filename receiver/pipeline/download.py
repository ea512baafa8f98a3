"""One result download on a thread of its own: each read hashed and written as it arrives.

The caller connects the socket (``URLPolicy.connect``: an address it checked, so nothing here
resolves a name) and runs ``Exchange.open`` and ``Exchange.save`` through ``on_thread``.
``http.client`` frames the request and the response; each ``read1`` takes what the socket has
(up to 1 MiB), which is hashed and written while it is still in the CPU's cache, away from the
event loop. httpx under the event loop is much slower (h11 copies the body twice; every read
is a trip through httpcore, anyio and the loop), and so are filling a buffer before hashing
and writing it or handing filled buffers to a second thread: there the kernel's copy into the
page cache of a buffer no longer in cache dominates. docs/performance.md compares them with
the plain-socket floor (``bench.floor_download``).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from receiver.pipeline.sink import BUFFER_BYTES, BodySink, decoder_bits
from receiver.pipeline.urlsafety import default_port, scheme_port

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping
    from typing import BinaryIO

    import httpx

T = TypeVar("T")
USER_AGENT = "jobhook"
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 seconds: close() resets the connection


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
        self,
        sock: socket.socket,
        url: httpx.URL,
        *,
        tls: ssl.SSLContext | None,
        timeout: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._url = url
        self._headers = headers or {}
        """Sent besides the usual ones (the job API's key for a result it serves itself)."""
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
            headers.update(self._headers)
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
        output = BodySink(
            fh, limit, decoder_bits(response.headers.get("content-encoding")), self._url.host
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
