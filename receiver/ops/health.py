"""Open probes: ``/healthz`` says the process is alive, ``/readyz`` that the store answers
(and, in detail, how durable its commits are beyond the server, whether each source's
confirmations drain in time at its rate budget, and each handler's circuit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import JSONResponse

from receiver.errors import StoreUnavailableError

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.store.rows import CircuitRow


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    try:
        await request.app.state.store.ping()
    except StoreUnavailableError as exc:
        return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
    body: dict[str, object] = {"status": "ready"}
    try:
        durability = await request.app.state.store.durability()
    except StoreUnavailableError:
        durability = None
    if durability is not None:
        # Ready all the same: whether a failover may lose acknowledged commits is the
        # database's configuration, not this replica's state.
        body["store"] = {"durability": durability}
    runtime = getattr(request.app.state, "runtime", None)
    drain = getattr(runtime, "drain", None)
    if drain is not None and drain.status:
        # Ready all the same: a slow backlog is a warning, not a reason to take traffic away.
        body["confirmations"] = {name: d.as_json() for name, d in sorted(drain.status.items())}
    try:
        circuits = await request.app.state.store.circuits()
    except StoreUnavailableError:
        circuits = []
    if circuits:
        # Ready too: an open circuit holds one handler's deliveries, not the whole service.
        body["circuits"] = {c.handler: circuit_doc(c) for c in circuits}
    return JSONResponse(body)


def circuit_doc(row: CircuitRow) -> dict[str, object]:
    """A handler's circuit: state, failures in a row, and when an open one next probes."""
    retry = None if row.state == "closed" or row.retry_at is None else round(row.retry_at, 3)
    return {"state": row.state, "failures": row.failures, "retry_at": retry}
