"""Which handlers' circuits hold deliveries back, for the pages that show a delivery: a pending
delivery of such a handler is waiting for the circuit, not for its "next try"."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from receiver.pipeline.dispatcher import Dispatcher
    from receiver.store import Store
    from receiver.store.rows import CircuitRow

PROBE_WAIT = 8.0
"""How long a replay from the page waits for its probe's outcome before it answers."""


async def holding(store: Store) -> dict[str, CircuitRow]:
    """The circuits that are not closed (open, or half-open with a probe out), by handler."""
    return {c.handler: c for c in await store.circuits() if c.state != "closed"}


async def probe_held(dispatcher: Dispatcher, store: Store, handlers: Iterable[str]) -> str | None:
    """Replayed deliveries of ``handlers``: each of them whose circuit is open sends its one
    probe now. How they went, as a ``web.PROBES`` key: ``ok`` (every circuit closed),
    ``failed`` (one opened again), ``waiting`` (no outcome yet); None when none was held."""
    held = await holding(store)
    outcomes = [await dispatcher.probe(h, PROBE_WAIT) for h in sorted(set(handlers)) if h in held]
    found = [o for o in outcomes if o is not None]
    if not found:
        return None
    if all(o == "closed" for o in found):
        return "ok"
    return "failed" if "open" in found else "waiting"
