"""A response in one write: uvicorn's httptools protocol with its head and body sent together.

uvicorn writes a response's head (at ``http.response.start``) and its body (at the first
``http.response.body``) with two calls of ``transport.write``, and uvloop makes each its own
``write`` system call at once. On a connection to a local peer (a proxy or a sidecar's client
on the same host, the benchmark's load generator) each of those calls also runs the peer's
receive path and wakes it, so a small answer (a webhook's) cost two of both.
``OneWriteProtocol`` hands the protocol a transport (``HeldHead``) that keeps a response's
head back until the next write, which takes it along; the webhook endpoint and Starlette's
responses send their body in the same step of the event loop, so the answer leaves in one
system call. A head whose body does not follow at once (a stream that waits for its first
event) leaves at the loop's next step, before anything else the connection writes: what the
peer receives, and in what order, is unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    import asyncio

HEAD = b"HTTP/"
"""What a response's head (and only a head, or a body that happens to start so: held all the
same, and just as safely) begins with."""
HEAD_MAX = 16384
"""A head longer than this goes out on its own: only short ones are worth a copy."""


class HeldHead:
    """``transport`` as the protocol sees it: a write that starts a response is held until the
    next write or the event loop's next step, whichever comes first; everything else is the
    transport's own (``__getattr__``)."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data[:5] == HEAD and len(data) <= HEAD_MAX:
            self._held = bytes(data)
            self._loop.call_soon(self.release)
        else:
            self._transport.write(data)

    def release(self) -> None:
        """Write what is held, if anything (a head whose body did not follow at once)."""
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def writelines(self, data: Any) -> None:
        self.release()
        self._transport.writelines(data)

    def write_eof(self) -> None:
        self.release()
        self._transport.write_eof()

    def close(self) -> None:
        self.release()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a ``HeldHead`` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldHead(transport, self.loop))  # type: ignore[arg-type]
