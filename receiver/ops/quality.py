"""Job-quality metrics: handlers' circuits (read from the store at each scrape)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Gauge

from receiver.errors import JobhookError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from receiver.store import Store


class QualityMetrics:
    """Metrics of how well jobs and deliveries go, registered on the app's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.circuit_open = Gauge(
            "jobhook_circuit_open",
            "1 while a handler's circuit is open or half-open (deliveries wait), else 0.",
            ["handler"],
            registry=registry,
        )
        self.circuit_failures = Gauge(
            "jobhook_circuit_failures",
            "A handler's failed attempts in a row, as its circuit counts them.",
            ["handler"],
            registry=registry,
        )

    async def refresh(self, store: Store) -> None:
        """Set the circuit gauges from the store; left as they were when it does not answer."""
        try:
            circuits = await store.circuits()
        except JobhookError:
            return
        for row in circuits:
            self.circuit_open.labels(row.handler).set(0 if row.state == "closed" else 1)
            self.circuit_failures.labels(row.handler).set(row.failures)
