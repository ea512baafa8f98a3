"""The ceiling: a bare Starlette endpoint on jobhook's server stack (uvicorn, uvloop, httptools).

It reads the body and answers a small JSON, as the webhook endpoint does, minus the work.
``python -m bench.bare PORT`` serves it with the uvicorn options ``jobhook serve`` uses (not its
``gc.freeze()`` at start, nor its fallbacks where uvloop or httptools is missing), on uvicorn's
own httptools protocol: jobhook's sends each answer in one write (``receiver.service.onewrite``),
and ``bench.sides`` measures this endpoint on that one too (``bare-one-write``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp


async def accept(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"status": "accepted", "job_id": "bare", "state": "succeeded"})


async def ready(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ready"})


app = Starlette(
    routes=[
        Route("/webhooks/{source}", accept, methods=["POST"]),
        Route("/readyz", ready, methods=["GET"]),
    ]
)


OPTIONS: dict[str, object] = {
    "host": "127.0.0.1",
    "loop": "uvloop",
    "http": "httptools",
    "log_config": None,
    "access_log": False,
    "server_header": False,
}
"""uvicorn's options here (one process, one worker, uvicorn's defaults otherwise: backlog 2048,
keep-alive 5 s, no limit on concurrency): what the benchmark's header prints."""


def serve(app: ASGIApp, port: int) -> None:
    """Serve ``app`` on loopback with the options ``jobhook serve`` uses."""
    uvicorn.run(app, port=port, **OPTIONS)  # type: ignore[arg-type]


def main() -> None:
    serve(app, int(sys.argv[1]))


if __name__ == "__main__":
    main()
