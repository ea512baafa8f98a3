"""Open probes: ``/healthz`` says the process is alive, ``/readyz`` that the store answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import JSONResponse

from receiver.errors import StoreUnavailableError

if TYPE_CHECKING:
    from starlette.requests import Request


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    try:
        await request.app.state.store.ping()
    except StoreUnavailableError as exc:
        return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready"})
