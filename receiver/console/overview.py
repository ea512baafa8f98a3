"""The overview: what finished, how long it took and what failed over a period (charts from
the store), the error breakdown, per-field confidence with the fields the alert rule would flag
highlighted, the backlog, each source's rate budget and each handler's circuit."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from receiver.admin import jobs as jobroutes
from receiver.admin import query as jobquery
from receiver.admin import scope
from receiver.admin import views as jobviews
from receiver.console import charts, circuits, web
from receiver.errors import RejectedError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

BUCKETS = {"24h": 3600.0, "7d": 6 * 3600.0, "30d": 86400.0}
ALERT_MIN_COUNT = 10
"""JobhookFieldConfidenceLow (deploy/prometheus/alerts.yml) fires when a field's mean
confidence is under 0.80 over at least this many extractions; the page flags by the same rule,
with each source's ``confidence_alert`` as its threshold."""


@web.guarded
async def overview(request: Request) -> Response:
    try:
        period, seconds = jobquery.parse_period(request.query_params.get("period"))
    except RejectedError:
        period, seconds = jobquery.parse_period(None)
    store = jobroutes.store_of(request)
    now = time.time()
    since = now - seconds
    configured = request.app.state.settings.sources
    thresholds = {name: cfg.confidence_alert for name, cfg in configured.items()}
    sources = scope.sources_of(request)
    stats = await jobviews.full_stats(store, period, since, thresholds, sources)
    width = BUCKETS[period]
    start = since - since % width
    outcomes = await store.outcomes_over_time(start, width, sources=sources)
    errors = await store.errors_over_time(start, width, sources=sources)
    runtime = request.app.state.runtime
    drain = getattr(runtime, "drain", None)
    budgets = (
        {name: d.as_json() for name, d in sorted(drain.status.items()) if scope.sees(request, name)}
        if drain is not None and drain.status
        else {}
    )
    confirmations = await store.confirmations_due()
    fields = weak_fields(stats.get("fields") or [])
    # The backlog is every source's work: a limited token sees its own dead letters only.
    backlog = await store.backlog() if sources is None else None
    dead = (
        backlog.dead
        if backlog is not None
        else sum(g.count for g in await store.dead_groups(sources=sources))
    )
    return web.render(
        request,
        "overview.html",
        period=period,
        periods=list(BUCKETS),
        stats=stats,
        fields=fields,
        flagged=sum(1 for f in fields if f["weak"]),
        thresholds=sorted({f["threshold"] for f in fields}) or [jobviews.DEFAULT_CONFIDENCE_ALERT],
        min_count=ALERT_MIN_COUNT,
        charts=[
            charts.outcomes(outcomes, since, now, width),
            charts.latency(outcomes, since, now, width),
            charts.errors(errors, since, now, width),
        ],
        backlog=backlog,
        dead=dead,
        confirmations={k: n for k, n in confirmations.items() if scope.sees(request, k)},
        budgets=budgets,
        held=await circuits.holding(store),
        seconds_text=charts.seconds_text,
    )


def weak_fields(rows: list[Any]) -> list[dict[str, Any]]:
    """The per-field confidence rows, each ``weak`` when the alert rule would flag it (mean under
    its threshold over at least ALERT_MIN_COUNT extractions) and ``low_p10`` when a tenth of
    its values or more are under the threshold; flagged rows first."""
    marked: list[dict[str, Any]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        mean, p10, threshold = row.get("mean"), row.get("p10"), row.get("threshold")
        if not isinstance(threshold, int | float):
            marked.append({**row, "weak": False, "low_p10": False})
            continue
        weak = (
            isinstance(mean, int | float)
            and mean < threshold
            and int(row.get("count") or 0) >= ALERT_MIN_COUNT
        )
        low = isinstance(p10, int | float) and p10 < threshold
        marked.append({**row, "weak": weak, "low_p10": low})
    return sorted(marked, key=lambda r: (not r["weak"], not r["low_p10"]))
