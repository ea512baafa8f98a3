"""Gauges of each source's job API budget and of the confirmations waiting on it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from prometheus_client.metrics_core import Metric


def budget_gauges(
    budgets: Mapping[str, float],
    confirmations: Mapping[str, int],
    drain_seconds: Mapping[str, float],
) -> Iterator[Metric]:
    """The budget, the confirmations waiting and their drain time, each by source."""
    budget = GaugeMetricFamily(
        "jobhook_rate_budget_per_minute",
        "Each source's current job API budget (its default or setting, or learned from the "
        "server's RateLimit-Limit).",
        labels=["source"],
    )
    waiting = GaugeMetricFamily(
        "jobhook_confirmations_waiting",
        "Completions waiting for their job API's confirmation, by source.",
        labels=["source"],
    )
    eta = GaugeMetricFamily(
        "jobhook_confirmation_drain_seconds",
        "How long the confirmations waiting take to drain at the current budget, by source.",
        labels=["source"],
    )
    for name, per_minute in sorted(budgets.items()):
        budget.add_metric([name], per_minute)
    for name, count in sorted(confirmations.items()):
        waiting.add_metric([name], count)
    for name, seconds in sorted(drain_seconds.items()):
        eta.add_metric([name], seconds)
    yield from (budget, waiting, eta)
