"""Job-quality metrics: how jobs finish (processing time, outcome, error code) and handlers'
circuits (read from the store at each scrape).

A job is counted once, when its outcome is final, by the replica that made it final: the one
whose ingest created a completion that needs no resolution, or the one whose resolution of the
completion was stored (a lost lease stores nothing and counts nothing). Completions are unique
per job and replays requeue dispatches only, so duplicates, resends and replays count nothing,
and ``sum()`` over replicas counts each job once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog
from prometheus_client import Counter, Gauge, Histogram

from receiver.errors import JobhookError
from receiver.store.rows import JobFilter

if TYPE_CHECKING:
    from collections.abc import Callable

    from prometheus_client import CollectorRegistry

    from receiver.store import Store

log = structlog.get_logger(__name__)
_Children = tuple[Counter, Counter | None, Histogram]
"""A finished job's counter, failed-jobs counter (None for a usable outcome) and histogram."""

# Seconds to an hour and past it: a page takes seconds, a large document many minutes. 600 is a
# bound so that the default p95 alert (deploy/prometheus/alerts.yml) reads exactly.
PROCESSING_BUCKETS = (
    0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 450.0,
    600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 7200.0,
)  # fmt: skip
FAILED_OUTCOMES = frozenset({"failed", "cancelled", "expired", "unresolved"})
"""Outcomes counted in ``jobhook_jobs_failed_total`` too (``GET /jobs/stats`` counts the same)."""
JOBHOOK_CODES = frozenset({
    "provider_failed", "provider_cancelled", "provider_expired", "job_not_found",
    "confirm_timeout", "result_expired", "result_consumed", "result_too_large",
    "checksum_mismatch", "unsafe_url", "fetch_failed", "disk_full", "no_fetcher", "resolve_failed",
})  # fmt: skip
"""jobhook's own codes of a failed job (receiver.pipeline.failures): always a label of their own."""
MAX_PROVIDER_CODES = 50
"""Distinct provider codes a process labels; later new ones are counted as ``other``."""
UNKNOWN_CODE = "unknown"
OTHER_CODE = "other"


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
        self.processing = Histogram(
            "jobhook_job_processing_seconds",
            "From a job's creation (first sighting or registration) to jobhook learning its "
            "terminal state (created_at to terminal_at), observed once when it finishes.",
            ["source"],
            buckets=PROCESSING_BUCKETS,
            registry=registry,
        )
        self.finished = Counter(
            "jobhook_jobs_finished",
            "Jobs finished, by source and outcome: succeeded, partial, failed, cancelled, "
            "expired, unresolved (the result could not be had).",
            ["source", "outcome"],
            registry=registry,
        )
        self.failed = Counter(
            "jobhook_jobs_failed",
            "Jobs finished without a usable result, by source and normalised error code.",
            ["source", "code"],
            registry=registry,
        )
        self._provider_codes: set[str] = set()
        self._children: dict[tuple[str, str, str | None], _Children] = {}
        """(source, outcome, code label) -> its series: a webhook that finishes a job counts
        it on the event loop's thread, where ``labels()`` each time cost twice the counting."""

    def code_label(self, code: str | None) -> str:
        """``code`` as a label: jobhook's own always, a provider's while fewer than the cap."""
        if not code:
            return UNKNOWN_CODE
        if code in JOBHOOK_CODES or code in self._provider_codes:
            return code
        if len(self._provider_codes) < MAX_PROVIDER_CODES:
            self._provider_codes.add(code)
            return code
        return OTHER_CODE

    def job_finished(
        self, source: str, outcome: str, code: str | None, seconds: float | None
    ) -> None:
        """One job's final outcome (``source`` already a bounded label)."""
        label = self.code_label(code) if outcome in FAILED_OUTCOMES else None
        key = (source, outcome, label)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (
                self.finished.labels(source, outcome),
                None if label is None else self.failed.labels(source, label),
                self.processing.labels(source),
            )
        finished, failed, processing = children
        finished.inc()
        if failed is not None:
            failed.inc()
        if seconds is not None:
            processing.observe(max(seconds, 0.0))

    async def refresh(self, store: Store) -> None:
        """Set the circuit gauges from the store; left as they were when it does not answer."""
        try:
            circuits = await store.circuits()
        except JobhookError:
            return
        for row in circuits:
            self.circuit_open.labels(row.handler).set(0 if row.state == "closed" else 1)
            self.circuit_failures.labels(row.handler).set(row.failures)


class JobOutcomes:
    """Counts finished jobs in ``QualityMetrics``, reading their times and normalised error
    code from the store in a task of their own, so nobody waits for the read (least of all a
    webhook's answer)."""

    def __init__(
        self, store: Store, metrics: QualityMetrics, label: Callable[[str], str] = str
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._label = label
        self._tasks: set[asyncio.Task[None]] = set()

    def counted(self, source: str, outcome: str, code: str | None, seconds: float | None) -> None:
        """Count a job whose times and code are known already (a webhook that completed it:
        the store's ingest answered how long it took), without reading it."""
        if outcome in FAILED_OUTCOMES and code is None and outcome != "unresolved":
            code = f"provider_{outcome}"
        self._metrics.job_finished(self._label(source), outcome, code, seconds)

    def finished(self, source: str, job_id: str, outcome: str, code: str | None = None) -> None:
        """The job's outcome is final now; ``code`` is used when the store cannot tell one."""
        task = asyncio.get_running_loop().create_task(self.settle(source, job_id, outcome, code))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self, source: str, job_id: str, outcome: str, code: str | None) -> None:
        """Read the job once and count it (without its duration if the store does not answer)."""
        seconds: float | None = None
        try:
            found = await self._store.list_jobs(JobFilter(source=source, job_id=job_id), limit=1)
        except JobhookError as exc:
            log.warning("job_metrics_read_failed", source=source, job_id=job_id, error=str(exc))
            found = []
        if found:
            job = found[0].job
            code = found[0].failure_code or code
            if job.terminal_at is not None:
                seconds = job.terminal_at - job.created_at
        elif outcome in FAILED_OUTCOMES and code is None and outcome != "unresolved":
            code = f"provider_{outcome}"
        self._metrics.job_finished(self._label(source), outcome, code, seconds)

    async def close(self, grace: float = 5.0) -> None:
        """Wait for the counts still being read (at most ``grace`` seconds), then drop the rest."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
