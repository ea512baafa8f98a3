"""Open probes: ``/healthz`` says the process is alive, ``/readyz`` that the store answers
(and, in detail, whether each source's confirmations drain in time at its rate budget)."""

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
    body: dict[str, object] = {"status": "ready"}
    runtime = getattr(request.app.state, "runtime", None)
    drain = getattr(runtime, "drain", None)
    if drain is not None and drain.status:
        # Ready all the same: a slow backlog is a warning, not a reason to take traffic away.
        body["confirmations"] = {name: d.as_json() for name, d in sorted(drain.status.items())}
    return JSONResponse(body)
