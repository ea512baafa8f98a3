"""Every Prometheus metric jobhook exports, and the open ``GET /metrics`` route.

Each app has its own ``CollectorRegistry``, so several apps in one process (tests, the demo)
never share counters. Counters that happen per request or per delivery are pushed where they
happen (``webhook``, ``delivered``, ``purged``); what long-lived parts count themselves (the job
APIs' calls, the rate limiters' waits, the fetcher's bytes, the ingestor's events, a SQLite
store's checkpoints) is read at scrape time, and so are the backlog gauges, from the store.
"""

from __future__ import annotations

import bisect
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString
from starlette.responses import Response

from receiver.errors import JobhookError
from receiver.ops.budgets import budget_gauges
from receiver.ops.confidence_metrics import ConfidenceMetrics
from receiver.ops.quality import QualityMetrics

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

    from prometheus_client.metrics_core import Metric
    from starlette.requests import Request

    from receiver.store import Store
    from receiver.store.connector import WalStats

UNKNOWN_SOURCE = "_unknown"
_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
BACKLOG_KINDS = ("resolving", "pending", "running", "dead")


@dataclass(frozen=True, slots=True)
class RuntimeCounts:
    """What the long-lived parts counted themselves, read at scrape time."""

    api_calls: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # source -> status
    rate_waits: Mapping[str, int] = field(default_factory=dict)  # by source
    rate_waited: Mapping[str, float] = field(default_factory=dict)  # seconds, by source
    bytes_fetched: int = 0
    fetch_failures: Mapping[str, int] = field(default_factory=dict)  # by code
    events: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (via, outcome)
    budgets: Mapping[str, float] = field(default_factory=dict)  # requests a minute, by source
    confirmations: Mapping[str, int] = field(default_factory=dict)  # waiting, by source
    drain_seconds: Mapping[str, float] = field(default_factory=dict)  # their ETA, by source


class Metrics:
    """The registry of one app and its metrics; the runtime's counts are bound by the lifespan."""

    def __init__(
        self,
        sources: Collection[str] = (),
        confidence_fields: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._sources = frozenset(sources)
        self._read_counts: Callable[[], RuntimeCounts] | None = None
        self.wal: WalStats | None = None
        """The store's checkpoint figures at the last ``refresh`` (None: not a SQLite store)."""
        r = self.registry = CollectorRegistry()
        self.answers = WebhookAnswers()
        r.register(self.answers)
        self.deliveries = Counter(
            "jobhook_handler_deliveries",
            "Handler attempts by handler and outcome: succeeded, retry, dead.",
            ["handler", "outcome"],
            registry=r,
        )
        self.delivery_seconds = Histogram(
            "jobhook_handler_seconds",
            "How long one handler attempt took.",
            ["handler"],
            buckets=_FAST,
            registry=r,
        )
        self.delivery_delay = Histogram(
            "jobhook_handler_delay_seconds",
            "From a job's completion to the start of a handler attempt.",
            ["handler"],
            buckets=_SLOW,
            registry=r,
        )
        self.queue_depth = Gauge(
            "jobhook_queue_depth",
            "Work not yet delivered: completions resolving, dispatches pending/running/dead.",
            ["kind"],
            registry=r,
        )
        self.oldest_pending = Gauge(
            "jobhook_oldest_pending_seconds",
            "Age of the oldest completion or dispatch not yet delivered (0 when none).",
            registry=r,
        )
        self.store_up = Gauge(
            "jobhook_store_up", "1 when the store answered at the last scrape.", registry=r
        )
        self.purged = Counter(
            "jobhook_purged",
            "Retention: jobs purged, and result files deleted.",
            ["what"],
            registry=r,
        )
        self.admin_refused = Counter(
            "jobhook_admin_refused",
            "Refused admin and console requests by reason: missing_token, wrong_token, "
            "forbidden (the token's role is too low), login_refused, login_throttled.",
            ["reason"],
            registry=r,
        )
        for reason in ("missing_token", "wrong_token", "forbidden", "login_refused",
                       "login_throttled"):  # fmt: skip
            self.admin_refused.labels(reason)  # present at 0, so rate() sees the first one
        r.register(_RuntimeCollector(self))
        r.register(_WalCollector(self))
        self.quality = QualityMetrics(r)
        self.confidence = ConfidenceMetrics(r, confidence_fields)

    def bind(self, read: Callable[[], RuntimeCounts] | None) -> None:
        """Read the runtime's own counts through ``read`` at every scrape (None: unbind)."""
        self._read_counts = read

    def runtime_counts(self) -> RuntimeCounts | None:
        return None if self._read_counts is None else self._read_counts()

    def purged_now(self, jobs: int, results: int) -> None:
        """A retention sweep deleted ``jobs`` jobs and ``results`` result files."""
        self.purged.labels("jobs").inc(jobs)
        self.purged.labels("results").inc(results)

    def source_label(self, source: str) -> str:
        """Unknown sources share one label: the URL must not mint new time series."""
        return source if source in self._sources else UNKNOWN_SOURCE

    def webhook(self, source: str, outcome: str, seconds: float, reason: str | None = None) -> None:
        """One webhook request answered; ``reason`` for a rejection."""
        self.answers.count(self.source_label(source), outcome, seconds, reason)

    def delivered(self, handler: str, outcome: str, seconds: float) -> None:
        """The Dispatcher's ``on_delivered``: "started" carries the delay since completion."""
        if outcome == "started":
            self.delivery_delay.labels(handler).observe(max(seconds, 0.0))
            return
        self.deliveries.labels(handler, outcome).inc()
        self.delivery_seconds.labels(handler).observe(seconds)

    async def refresh(self, store: Store) -> None:
        """Set the backlog gauges from the store (``store_up`` 0 when it does not answer), and
        read its checkpoint figures."""
        self.wal = store.wal_stats()
        try:
            backlog = await store.backlog()
        except JobhookError:
            self.store_up.set(0)
            return
        self.store_up.set(1)
        await self.quality.refresh(store)
        for kind in BACKLOG_KINDS:
            self.queue_depth.labels(kind).set(getattr(backlog, kind))
        oldest = backlog.oldest_pending_at
        self.oldest_pending.set(0.0 if oldest is None else max(time.time() - oldest, 0.0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class WebhookAnswers:
    """The webhook counters (``jobhook_webhooks``, ``jobhook_webhook_rejections``,
    ``jobhook_webhook_seconds``), counted in plain dicts and rendered at scrape time.

    prometheus_client's children take a lock for every ``inc`` and ``observe``, and these run
    for every request, several times the cost of a dict update. No lock is needed: requests are
    answered and scrapes rendered on the event loop's thread alone. The exposition is the one
    prometheus_client's own Counter and Histogram write, ``_created`` samples included.
    """

    def __init__(self) -> None:
        self.answered: dict[tuple[str, str], list[float]] = {}
        """(source, outcome) -> [count, created]"""
        self.rejected: dict[tuple[str, str], list[float]] = {}
        """(source, reason) -> [count, created]"""
        self.seconds: dict[str, list[float]] = {}
        """outcome -> [count in each bucket of _FAST, count above them, sum, created]"""

    def count(self, source: str, outcome: str, seconds: float, reason: str | None) -> None:
        """One answer; ``reason`` for a rejection (its outcome is then ``rejected``)."""
        if reason:
            outcome = "rejected"
            _count(self.rejected, (source, reason))
        _count(self.answered, (source, outcome))
        timing = self.seconds.get(outcome)
        if timing is None:
            timing = self.seconds[outcome] = [0] * (len(_FAST) + 1) + [0.0, time.time()]
        timing[bisect.bisect_left(_FAST, seconds)] += 1  # the first bucket whose bound >= it
        timing[-2] += seconds

    def collect(self) -> Iterator[Metric]:
        yield _counters(
            "jobhook_webhooks",
            "Webhook requests by source and outcome: accepted, duplicate, rejected, failed.",
            ["source", "outcome"],
            self.answered,
        )
        yield _counters(
            "jobhook_webhook_rejections",
            "Webhooks refused with a 4xx, by source and reason (bad_signature, ...).",
            ["source", "reason"],
            self.rejected,
        )
        timed = HistogramMetricFamily(
            "jobhook_webhook_seconds",
            "Time to read, verify and durably store a webhook, by outcome.",
            labels=["outcome"],
        )
        bounds = [*map(floatToGoString, _FAST), "+Inf"]
        for outcome, timing in self.seconds.items():
            cumulative = list(itertools.accumulate(timing[: len(bounds)]))
            timed.add_metric([outcome], list(zip(bounds, cumulative, strict=True)), timing[-2])
            timed.samples.append(Sample(timed.name + "_created", {"outcome": outcome}, timing[-1]))
        yield timed


def _counters(
    name: str, documentation: str, labels: list[str], counts: dict[tuple[str, str], list[float]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, (count, created) in counts.items():
        family.add_metric(values, count, created=created)
    return family


def _count(counts: dict[tuple[str, str], list[float]], key: tuple[str, str]) -> None:
    entry = counts.get(key)
    if entry is None:
        counts[key] = [1, time.time()]
    else:
        entry[0] += 1


class _RuntimeCollector:
    """Store, at scrape time, what the runtime's long-lived parts count themselves."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        counts = self._metrics.runtime_counts()
        calls = CounterMetricFamily(
            "jobhook_provider_api_calls",
            "Calls to providers' job APIs (polls and confirmations) by source and status.",
            labels=["source", "status"],
        )
        waits = CounterMetricFamily(
            "jobhook_rate_limit_waits",
            "Requests that waited for a slot of the provider's rate budget, by source.",
            labels=["source"],
        )
        waited = CounterMetricFamily(
            "jobhook_rate_limit_wait_seconds",
            "Time spent waiting for the provider's rate budget, by source.",
            labels=["source"],
        )
        fetched = CounterMetricFamily(
            "jobhook_result_bytes_fetched", "Bytes of results downloaded from result URLs."
        )
        fetch_failed = CounterMetricFamily(
            "jobhook_result_fetch_failures",
            "Result downloads that failed, by code (disk_full, fetch_failed, result_expired...); "
            "a retried completion counts each time.",
            labels=["code"],
        )
        events = CounterMetricFamily(
            "jobhook_events",
            "Events stored, by how they came (webhook, poll, track, list) and outcome "
            "(accepted, completed, duplicate).",
            labels=["via", "outcome"],
        )
        if counts is not None:
            for name, by_status in sorted(counts.api_calls.items()):
                for status, count in sorted(by_status.items()):
                    calls.add_metric([name, status], count)
            for name, waited_count in sorted(counts.rate_waits.items()):
                waits.add_metric([name], waited_count)
            for name, seconds in sorted(counts.rate_waited.items()):
                waited.add_metric([name], seconds)
            fetched.add_metric([], counts.bytes_fetched)
            for code, count in sorted(counts.fetch_failures.items()):
                fetch_failed.add_metric([code], count)
            for (via, outcome), count in sorted(counts.events.items()):
                events.add_metric([via, outcome], count)
        yield from (calls, waits, waited, fetched, fetch_failed, events)
        if counts is None:
            yield from budget_gauges({}, {}, {})
        else:
            yield from budget_gauges(counts.budgets, counts.confirmations, counts.drain_seconds)


class _WalCollector:
    """A SQLite store's checkpoint figures (``WalStats``) as the last refresh read them; no
    series at all for a store without them (PostgreSQL checkpoints in its server)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        wal = self._metrics.wal
        if wal is not None:
            yield from _wal_families(wal)


def _wal_families(wal: WalStats) -> Iterator[Metric]:
    """The ``jobhook_store_*`` families of one reading of a SQLite store's checkpointer."""
    counters = (
        ("checkpoints", "Checkpoint passes that copied WAL frames into the database file.",
         wal.checkpoints),
        ("checkpoint_frames", "WAL frames copied into the database file by checkpoints.",
         wal.checkpoint_frames),
        ("checkpoint_seconds", "Time spent in checkpoint passes.", wal.checkpoint_seconds),
        ("wal_restarts", "Times the WAL was copied whole under a hold on the writes, so that "
         "the next write starts it over.", wal.restarts),
        ("write_hold_frames", "WAL frames copied while the writes were held.", wal.hold_frames),
        ("write_hold_timeouts", "Holds on the writes that gave up waiting for the batch in "
         "flight (the WAL was not started over).", wal.hold_timeouts),
    )  # fmt: skip
    for name, documentation, count in counters:
        yield CounterMetricFamily(f"jobhook_store_{name}", documentation, value=count)
    held = HistogramMetricFamily(
        "jobhook_store_write_hold_seconds",
        "How long each hold kept new write batches from starting: waiting for the batch in "
        "flight, then the checkpoint pass that copies the WAL's last frames.",
    )
    bounds = [*map(floatToGoString, wal.hold_bounds), "+Inf"]
    cumulative = list(itertools.accumulate(wal.hold_buckets))
    held.add_metric([], list(zip(bounds, cumulative, strict=True)), wal.hold_seconds)
    yield held
    yield GaugeMetricFamily(
        "jobhook_store_wal_frames", "Frames in the WAL at the last checkpoint pass.",
        value=wal.wal_frames,
    )  # fmt: skip
    yield GaugeMetricFamily(
        "jobhook_store_wal_bytes",
        "Size of the WAL file: its longest so far, as SQLite reuses it without truncating it.",
        value=wal.wal_bytes,
    )


async def metrics_endpoint(request: Request) -> Response:
    """``GET /metrics``: the Prometheus text format, with the backlog counted now."""
    metrics: Metrics = request.app.state.metrics
    await metrics.refresh(request.app.state.store)
    return Response(metrics.render(), media_type=CONTENT_TYPE_PLAIN_0_0_4)
