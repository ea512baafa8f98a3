"""The overview: throughput and completion latency over a period (charts from the store), the
error breakdown, per-field confidence with weak fields marked, the backlog, each source's rate
budget and each handler's circuit."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from receiver.admin import jobs as jobroutes
from receiver.admin import query as jobquery
from receiver.admin import views as jobviews
from receiver.console import charts, web
from receiver.errors import RejectedError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

BUCKETS = {"24h": 3600.0, "7d": 6 * 3600.0, "30d": 86400.0}


@web.guarded
async def overview(request: Request) -> Response:
    try:
        period, seconds = jobquery.parse_period(request.query_params.get("period"))
    except RejectedError:
        period, seconds = jobquery.parse_period(None)
    store = jobroutes.store_of(request)
    now = time.time()
    since = now - seconds
    sources = request.app.state.settings.sources
    thresholds = {name: cfg.confidence_alert for name, cfg in sources.items()}
    stats = await jobviews.full_stats(store, period, since, thresholds)
    width = BUCKETS[period]
    buckets = await store.completed_over_time(since - since % width, width)
    runtime = request.app.state.runtime
    drain = getattr(runtime, "drain", None)
    budgets = (
        {name: d.as_json() for name, d in sorted(drain.status.items())}
        if drain is not None and drain.status
        else {}
    )
    return web.render(
        request,
        "overview.html",
        period=period,
        periods=list(BUCKETS),
        stats=stats,
        fields=_fields(stats),
        throughput=charts.throughput(buckets, since, now, width),
        latency=charts.latency(buckets, since, now, width),
        backlog=await store.backlog(),
        confirmations=await store.confirmations_due(),
        budgets=budgets,
        seconds_text=charts.seconds_text,
    )


def _fields(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 21's per-field confidence rows, each marked ``weak`` when its mean is under its
    threshold (empty when this build's stats have none)."""
    rows: list[dict[str, Any]] = []
    for row in stats.get("fields") or []:
        if not isinstance(row, dict):
            continue
        mean, threshold = row.get("mean"), row.get("threshold")
        weak = (
            isinstance(mean, int | float)
            and isinstance(threshold, int | float)
            and mean < threshold
        )
        rows.append({**row, "weak": weak})
    return rows
