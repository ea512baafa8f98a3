"""Serve an ASGI app with uvicorn inside the running event loop (demo, simulator, tests)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def serving(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int | None = None
) -> AsyncIterator[str]:
    """Run ``app`` (lifespan included) for the block; yields its base URL."""
    port = port or free_port(host)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        loop="asyncio",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
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
