"""A response in one write (receiver.service.onewrite), on real uvicorn servers on loopback.

Each case runs the same raw requests against uvicorn's stock httptools protocol and against
``OneWriteProtocol``, both with a transport that counts the writes that reach the socket: the
bytes a client receives are the same, and a small answer takes one write instead of two.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from receiver.service.onewrite import HeldHead, OneWriteProtocol
from receiver.service.serving import http_protocol
from receiver.sockets import bound_socket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

RELEASE = asyncio.Event()


async def small(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"status": "accepted", "job_id": "job-1", "state": "succeeded"})


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def stream(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        await RELEASE.wait()  # the head must reach the client before this
        yield b"data: first\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


APP = Starlette(routes=[
    Route("/small", small, methods=["GET", "POST", "HEAD"]),
    Route("/empty", empty),
    Route("/stream", stream),
])  # fmt: skip


class Counted:
    """The socket's transport, counting the writes that reach it."""

    def __init__(self, transport: asyncio.Transport, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def counting(base: type[HttpToolsProtocol], writes: list[bytes]) -> type[HttpToolsProtocol]:
    class Counting(base):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(Counted(transport, writes))

    return Counting


@contextlib.asynccontextmanager
async def server(protocol: type[HttpToolsProtocol]) -> AsyncIterator[int]:
    with bound_socket() as sock:  # bound here: no other test's server can take the port
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(APP, host="127.0.0.1", port=port, http=protocol, loop="asyncio",
                                log_config=None, access_log=False, lifespan="off",
                                server_header=False, date_header=False)  # fmt: skip
        srv = uvicorn.Server(config)
        task = asyncio.create_task(srv.serve(sockets=[sock]))
        while not srv.started:
            assert not task.done(), "the server did not start"
            await asyncio.sleep(0.005)
        try:
            yield port
        finally:
            srv.should_exit = True
            await task


@contextlib.asynccontextmanager
async def connection(
    port: int, request: bytes
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A raw connection to the server on ``port`` that has sent ``request``; closed after."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def exchange(port: int, request: bytes, responses: int, bodies: bool = True) -> bytes:
    """Send ``request`` (one or several, pipelined) and read until ``responses`` complete
    answers (heads only, without ``bodies``: a HEAD's), or the server closes."""
    async with connection(port, request) as (reader, _):
        received = b""
        while not _complete(received, responses, bodies):
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            if not chunk:
                break
            received += chunk
        return received


def _complete(received: bytes, responses: int, bodies: bool) -> bool:
    """Whether ``received`` holds ``responses`` whole answers (each with a Content-Length)."""
    rest = received
    for _ in range(responses):
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            return False
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length" and bodies:
                length = int(value)
        if len(rest) < length:
            return False
        rest = rest[length:]
    return True


POST = (b"POST /small HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: 2\r\n\r\n{}")  # fmt: skip
CASES = {  # the request, its answers, and the writes they take: stock, and in one write
    "one answer": (POST, 1, 2, 1),
    "three pipelined": (POST * 3, 3, 6, 3),
    "no body": (b"GET /empty HTTP/1.1\r\nhost: x\r\n\r\n", 1, 2, 1),  # its body is b""
    "HEAD": (b"HEAD /small HTTP/1.1\r\nhost: x\r\n\r\n", 1, 1, 1),  # a head only
    "connection close": (POST.replace(b"host: x", b"host: x\r\nconnection: close"), 1, 2, 1),
}


@pytest.mark.parametrize("case", CASES)
async def test_a_response_leaves_in_one_write_with_the_bytes_the_stock_protocol_sends(
    case: str,
) -> None:
    request, responses, stock_writes, one_writes = CASES[case]
    received: dict[str, bytes] = {}
    writes: dict[str, list[bytes]] = {"stock": [], "one": []}
    for name, base in (("stock", HttpToolsProtocol), ("one", OneWriteProtocol)):
        async with server(counting(base, writes[name])) as port:
            received[name] = await exchange(port, request, responses, case != "HEAD")
    assert received["one"] == received["stock"]
    assert received["one"].count(b"HTTP/1.1 ") == responses
    assert b"".join(writes["one"]) == b"".join(writes["stock"])
    assert (len(writes["stock"]), len(writes["one"])) == (stock_writes, one_writes)


async def test_a_head_whose_body_waits_leaves_at_once_and_the_body_after_it() -> None:
    """A stream's head is not held for its first event: the client has it while the body
    waits, and the body follows when it comes."""
    RELEASE.clear()
    writes: list[bytes] = []
    async with server(counting(OneWriteProtocol, writes)) as port:
        stream = b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n"
        async with connection(port, stream) as (reader, _):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"text/event-stream" in head
            assert writes == [head]  # the head alone: the body has not been produced yet
            RELEASE.set()
            body = await asyncio.wait_for(reader.readuntil(b"data: first\n\n"), 5)
            assert body.endswith(b"data: first\n\n")


async def test_a_100_continue_reaches_a_client_that_waits_for_it() -> None:
    """An interim 100 Continue is held like a head and released at the loop's next step: a
    client that sends its body only after it still gets it, then the answer."""
    async with server(OneWriteProtocol) as port:
        headers = POST.replace(b"\r\n\r\n{}", b"\r\nexpect: 100-continue\r\n\r\n")
        async with connection(port, headers) as (reader, writer):
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"{}")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")


async def test_a_held_head_is_written_before_close_and_dropped_on_abort() -> None:
    class Sink:
        def __init__(self) -> None:
            self.writes: list[bytes] = []
            self.closed = self.aborted = False

        def write(self, data: bytes) -> None:
            self.writes.append(data)

        def is_closing(self) -> bool:
            return self.closed or self.aborted

        def close(self) -> None:
            self.closed = True

        def abort(self) -> None:
            self.aborted = True

    loop = asyncio.get_running_loop()
    sink = Sink()
    held = HeldHead(sink, loop)  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert sink.writes == []
    held.close()
    assert sink.writes == [b"HTTP/1.1 200 OK\r\n\r\n"]
    assert sink.closed
    await asyncio.sleep(0)  # the release scheduled for the next step finds nothing held
    assert len(sink.writes) == 1

    sink = Sink()
    held = HeldHead(sink, loop)  # type: ignore[arg-type]
    held.write(b"HTTP/1.1 200 OK\r\n\r\n")
    held.abort()
    await asyncio.sleep(0)
    assert sink.writes == []
    assert sink.aborted


def test_jobhook_serves_with_the_one_write_protocol() -> None:
    assert http_protocol() is OneWriteProtocol
