"""``GET /status``: the service at a glance for ``jobhook status`` — the store, each source's
job API budget and confirmation backlog, each handler's circuit, and the work not yet done."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from receiver.admin import scope
from receiver.admin.views import iso
from receiver.errors import StoreUnavailableError
from receiver.ops.health import circuit_doc

if TYPE_CHECKING:
    from starlette.requests import Request

    from receiver.config.settings import Settings


def store_backend(settings: Settings) -> str:
    """``sqlite`` or ``postgresql``: the store's kind, never its URL (it may hold a password)."""
    return "sqlite" if settings.store.url.startswith("sqlite") else "postgresql"


async def service_status(request: Request) -> JSONResponse:
    """Ready or not, and why; 503 when the store does not answer (the rest is then unknown)."""
    settings: Settings = request.app.state.settings
    store = request.app.state.store
    body: dict[str, Any] = {"status": "ready", "store": {"backend": store_backend(settings)}}
    try:
        await store.ping()
        backlog = await store.backlog()
        circuits = {row.handler: circuit_doc(row) for row in await store.circuits()}
    except StoreUnavailableError as exc:
        body["status"] = "unavailable"
        body["store"]["error"] = str(exc)
        return JSONResponse(body, status_code=503)
    drain = getattr(getattr(request.app.state, "runtime", None), "drain", None)
    readings = drain.status if drain is not None else {}
    body["sources"] = {
        name: {"provider": cfg.provider, **(readings[name].as_json() if name in readings else {})}
        for name, cfg in sorted(settings.sources.items())
        if scope.sees(request, name)
    }
    closed = {"state": "closed", "failures": 0, "retry_at": None}
    body["handlers"] = {
        h.name: {"type": h.type, **circuits.get(h.name, closed)} for h in settings.handlers
    }
    body["backlog"] = {
        "completions_resolving": backlog.resolving,
        "deliveries_pending": backlog.pending,
        "deliveries_running": backlog.running,
        "deliveries_dead": backlog.dead,
        "oldest_waiting_since": iso(backlog.oldest_pending_at),
    }
    return JSONResponse(body)
