"""Serve an ASGI app with uvicorn inside the running event loop (demo, simulator, tests)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import time
from typing import TYPE_CHECKING

import uvicorn

from receiver.sockets import bound_socket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from starlette.types import ASGIApp


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (another process may take it before the caller
    binds it: a server in this process binds ``receiver.sockets.bound_socket`` instead)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def http_protocol() -> str | type[asyncio.Protocol]:
    """The HTTP protocol jobhook serves with: httptools' with each response in one write
    (``receiver.service.onewrite``), or h11's where httptools is not installed."""
    if importlib.util.find_spec("httptools") is None:
        return "h11"
    from receiver.service.onewrite import OneWriteProtocol  # imports httptools

    return OneWriteProtocol


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the program it runs in: uvicorn's own handlers
    would stop only this server on Ctrl-C (closing its port) and leave the program running."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int | None = None
) -> AsyncIterator[str]:
    """Run ``app`` (lifespan included) for the block; yields its base URL. Signals are the
    caller's to handle (``jobhook demo`` stops on SIGINT and SIGTERM)."""
    with bound_socket(host, port or 0) as sock:  # held from here: nobody else takes it
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            loop="asyncio",
            http=http_protocol(),
            timeout_graceful_shutdown=5,
        )
        server = _EmbeddedServer(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            deadline = time.monotonic() + 15
            while not server.started:
                if task.done() or time.monotonic() > deadline:
                    raise RuntimeError(f"the server on {host}:{port} did not start")
                await asyncio.sleep(0.01)
            yield f"http://{host}:{port}"
        finally:
            server.should_exit = True
            with contextlib.suppress(SystemExit):
                await asyncio.wait_for(task, timeout=15)
