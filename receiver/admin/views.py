"""The admin API's JSON documents, built from store reads.

The HTTP routes and the CLI (when it reads a store directly) both build their answers here, so
``jobhook jobs ls --json`` prints what ``GET /jobs`` returns. Times are ISO 8601 in UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from receiver import tracing
from receiver.admin.query import encode_cursor
from receiver.models import State
from receiver.ops.health import circuit_doc
from receiver.pipeline import failures
from receiver.store.rows import JobFilter

DEFAULT_CONFIDENCE_ALERT = 0.80

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from receiver.store import CompletionRow, DispatchRow, JobRow, Store
    from receiver.store.rows import (
        CircuitRow,
        DeliveryRow,
        ErrorCount,
        FieldStat,
        FieldStats,
        JobKey,
        JobListing,
        JobStats,
        ReprocessRow,
    )


def iso(at: float | None) -> str | None:
    """Unix seconds as ISO 8601 in UTC; None stays None."""
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()


def job_doc(job: JobRow, listing: JobListing | None = None) -> dict[str, Any]:
    """One job: its state, the provider's word, progress and, once terminal, its result."""
    progress = None
    if job.progress_done is not None or job.progress_total is not None:
        progress = {"done": job.progress_done, "total": job.progress_total}
    result = None
    if listing is not None and listing.result_sha256 is not None:
        result = {
            "sha256": listing.result_sha256,
            "bytes": listing.result_bytes,
            "available": listing.result_path is not None,
        }
    return {
        "source": job.source,
        "job_id": job.job_id,
        "state": job.state,
        "provider_status": job.provider_status,
        "terminal": job.terminal_at is not None and State(job.state).terminal,
        "metadata": job.metadata,
        "error": job.error,
        "error_code": listing.error_code if listing is not None else None,
        "progress": progress,
        "expected_pages": job.expected_pages,
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "terminal_at": iso(job.terminal_at),
        "processing_seconds": (
            None if job.terminal_at is None else round(job.terminal_at - job.created_at, 6)
        ),
        "confidence": listing.confidence if listing is not None else None,
        "result": result,
        "failure": failure_doc(listing) if listing is not None else None,
    }


def failure_doc(listing: JobListing) -> dict[str, Any] | None:
    """The job's normalised error: code, a bounded message, and where it arose."""
    if listing.failure_code is None:
        return None
    return {
        "code": listing.failure_code,
        "message": failures.bounded(listing.failure_message),
        "where": listing.failure_where,
    }


def listing_doc(listing: JobListing) -> dict[str, Any]:
    return job_doc(listing.job, listing)


async def jobs_page(
    store: Store, where: JobFilter, limit: int, after: JobKey | None
) -> dict[str, Any]:
    """``GET /jobs``: one page, newest first, and the cursor of the next (None at the end)."""
    rows = await store.list_jobs(where, limit=limit + 1, after=after)
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "jobs": [listing_doc(r) for r in rows],
        "next_cursor": encode_cursor(rows[-1].key) if more and rows else None,
    }


def delivery_doc(row: DeliveryRow) -> dict[str, Any]:
    return {
        "message_id": row.message_id,
        "state": row.state,
        "provider_status": row.provider_status,
        "received_at": iso(row.received_at),
    }


def completion_doc(row: CompletionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "state": row.state,
        "provider_status": row.provider_status,
        "phase": row.phase,
        "error": row.error,
        "created_at": iso(row.created_at),
        "resolve_attempts": row.attempts,
        "resolved_at": iso(row.resolved_at) if row.resolved_at is not None else None,
        "resolve_seconds": row.resolve_seconds,
        "trace_id": tracing.trace_id(row.traceparent),  # null unless stored with tracing on
        "result": (
            None
            if row.result_sha256 is None
            else {
                "sha256": row.result_sha256,
                "bytes": row.result_bytes,
                "available": row.result_path is not None,
            }
        ),
    }


def dispatch_doc(row: DispatchRow) -> dict[str, Any]:
    return {
        "handler": row.handler,
        "state": row.state,
        "attempts": row.attempts,
        "last_error": row.last_error,
        "error_code": row.error_code,
        "next_attempt_at": iso(row.next_attempt_at) if row.state == "pending" else None,
        "updated_at": iso(row.updated_at),
    }


async def job_detail(
    store: Store, source: str, job_id: str, sources: Sequence[str] | None = None
) -> dict[str, Any] | None:
    """``GET /jobs/{source}/{job_id}``: the job, its deliveries, completion and dispatches;
    None when it is unknown, or (``sources``: a limited token's) of another source."""
    only = tuple(sources) if sources is not None else None
    found = await store.list_jobs(JobFilter(source=source, job_id=job_id, sources=only), limit=1)
    if not found:
        return None
    completion = await store.completion_for(source, job_id)
    fields = (await store.fields_of([(source, job_id)])).get((source, job_id), [])
    job = {**listing_doc(found[0]), "fields": {f.field: f.confidence for f in fields}}
    link = await store.reprocess_of(source, job_id)
    origin = await store.reprocessed_from(source, job_id)
    job["reprocessed_as"] = reprocess_doc(link, link.new_job_id) if link is not None else None
    job["reprocessed_from"] = reprocess_doc(origin, origin.job_id) if origin is not None else None
    return {
        "job": job,
        "deliveries": [delivery_doc(d) for d in await store.deliveries_for(source, job_id)],
        "completion": completion_doc(completion) if completion is not None else None,
        "dispatches": [dispatch_doc(d) for d in await store.dispatches_for(source, job_id)],
    }


def reprocess_doc(link: ReprocessRow, job_id: str | None) -> dict[str, Any]:
    """One end of a reprocess link: the other job, and how its submission went."""
    return {"source": link.source, "job_id": job_id, "state": link.state,
            "attempts": link.attempts, "error": link.error, "at": iso(link.updated_at)}  # fmt: skip


async def full_stats(
    store: Store,
    period: str,
    since: float,
    thresholds: Mapping[str, float],
    sources: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``GET /jobs/stats`` read from ``store``; ``thresholds`` are the sources' confidence_alert.
    With ``sources`` (a limited token's) the counts are of their jobs only; the handlers'
    circuits are the service's, whichever jobs tripped them."""
    stats = await store.job_stats(since, sources=sources)
    confidence = await store.field_stats(
        since, thresholds, DEFAULT_CONFIDENCE_ALERT, sources=sources
    )
    return stats_doc(period, since, stats, await store.circuits(), confidence)


def stats_doc(
    period: str,
    since: float,
    stats: JobStats,
    circuits: Sequence[CircuitRow] = (),
    confidence: FieldStats | None = None,
) -> dict[str, Any]:
    """``GET /jobs/stats``: success rate is succeeded over terminal jobs (None with none);
    ``circuits`` are the handlers' circuits as they stand now; ``avg_confidence`` is the mean
    job-level confidence (each job's least confident field), ``fields`` each (source, field)'s
    figures, the least confident first."""
    return {
        "period": period,
        "since": iso(since),
        "total": stats.total,
        "by_state": dict(sorted(stats.by_state.items())),
        "by_source": dict(sorted(stats.by_source.items())),
        "terminal": stats.terminal,
        "success_rate": round(stats.succeeded / stats.terminal, 4) if stats.terminal else None,
        "processing_seconds": {
            "count": stats.durations,
            "avg": _round(stats.avg_seconds),
            "p50": _round(stats.p50_seconds),
            "p95": _round(stats.p95_seconds),
        },
        "handler_failures": stats.handler_failures,
        "errors": errors_doc(stats.errors),
        "circuits": {c.handler: circuit_doc(c) for c in circuits},
        "avg_confidence": _round(confidence.avg_confidence, 4) if confidence else None,
        "fields": [field_doc(f) for f in confidence.fields] if confidence else [],
    }


def field_doc(f: FieldStat) -> dict[str, Any]:
    """One field's figures; ``below`` is the share (0..1) of values under ``threshold``."""
    return {
        "source": f.source,
        "field": f.field,
        "count": f.count,
        "mean": round(f.mean, 4),
        "p10": round(f.p10, 4),
        "below": round(f.below / f.count, 4) if f.count else 0.0,
        "threshold": f.threshold,
    }


def errors_doc(counts: Sequence[ErrorCount]) -> dict[str, Any]:
    """Failures grouped by code, by where they arose, by source and by handler."""
    by_code: dict[str, int] = {}
    by_where: dict[str, int] = {}
    by_source: dict[str, dict[str, int]] = {}
    by_handler: dict[str, dict[str, int]] = {}
    for e in counts:
        by_code[e.code] = by_code.get(e.code, 0) + e.count
        by_where[e.where] = by_where.get(e.where, 0) + e.count
        codes = by_source.setdefault(e.source, {})
        codes[e.code] = codes.get(e.code, 0) + e.count
        if e.handler is not None:
            codes = by_handler.setdefault(e.handler, {})
            codes[e.code] = codes.get(e.code, 0) + e.count
    return {
        "total": sum(by_code.values()),
        "by_code": dict(sorted(by_code.items(), key=lambda item: (-item[1], item[0]))),
        "by_where": dict(sorted(by_where.items())),
        "by_source": dict(sorted(by_source.items())),
        "by_handler": dict(sorted(by_handler.items())),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
