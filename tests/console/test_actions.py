"""What the console does besides guarding: its startup line, reprocess through the admin API's
endpoint when there is one, the dead letters' dry run before a replay, and its charts."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.console import charts
from receiver.service.app import create_app
from receiver.store.rows import ErrorBucket, OutcomeBucket
from tests.adminsupport import admin_settings, deliver
from tests.console.support import csrf_of, log_in
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path


async def test_startup_logs_the_console_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with live_server(create_app(admin_settings(tmp_path))):
        pass
    out = capsys.readouterr()
    assert "console_on" in out.out + out.err
    assert "http://127.0.0.1:8000/ui/" in out.out + out.err


async def test_the_jobs_page_lists_oldest_first_on_request(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        for job in ("job-a", "job-b", "job-c"):
            await deliver(c, job)
        await log_in(c)
        newest = (await c.get("/ui/jobs")).text
        oldest = (await c.get("/ui/jobs?order=oldest")).text
    assert newest.index("job-c") < newest.index("job-b") < newest.index("job-a")
    assert oldest.index("job-a") < oldest.index("job-b") < oldest.index("job-c")


async def test_reprocess_is_not_offered_where_the_provider_cannot_take_it(tmp_path: Path) -> None:
    """Reducto gives no document back (docs/providers.md#reprocess): no button, the reason."""
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "job-1", status="Failed")
        await log_in(c)
        page = (await c.get("/ui/jobs/reducto/job-1")).text
        refused = await c.post("/ui/jobs/reducto/job-1/reprocess", data={"csrf": csrf_of(page)})
    assert '<button type="submit">Reprocess at the provider</button>' not in page
    assert "Reprocess at the provider: not possible (reducto:" in page
    assert refused.status_code == 422  # a hand-made POST gets the admin API's refusal
    assert "not_reprocessable: reducto:" in refused.text


async def test_batch_replay_counts_first_and_changes_nothing_until_confirmed(
    tmp_path: Path,
) -> None:
    extra = '[[handlers]]\nname = "hook"\ntype = "http"\nurl = "http://127.0.0.1:9/x"\n'
    extra += "max_attempts = 1\n"
    app = create_app(admin_settings(tmp_path, extra=extra))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "job-1")
        store = app.state.store
        for _ in range(200):
            if any(d.state == "dead" for d in await store.dispatches_for("reducto", "job-1")):
                break
            await asyncio.sleep(0.05)
        await log_in(c)
        token = csrf_of((await c.get("/ui/dead")).text)
        form = {"csrf": token, "handler": "hook", "error_code": "connect_error"}
        counted = await c.post("/ui/dead/replay", data=form)
        assert counted.status_code == 200
        assert "1 dead deliveries" in counted.text
        states = {d.handler: d.state for d in await store.dispatches_for("reducto", "job-1")}
        assert states["hook"] == "dead"  # the count changed nothing
        done = await c.post("/ui/dead/replay", data={**form, "confirm": "yes"})
        assert done.status_code == 303
        assert "done=replayed&n=1" in done.headers["location"]


def test_finished_jobs_have_one_column_per_interval_stacked_by_outcome() -> None:
    now = 1_700_000_000.0
    since = now - 24 * 3600
    start = now - now % 3600
    chart = charts.outcomes([OutcomeBucket(start, 5, 3, 1, 1.0, 2.0)], since, now, 3600)
    assert len(chart.columns) == 25
    (last,) = [c for c in chart.columns if c.marks]
    assert [m.kind for m in last.marks] == ["ok", "bad", "other"]
    assert "5 finished (3 succeeded, 1 failed, 1 partial)" in last.label
    assert [t.text for t in chart.y_ticks] == ["0", "2", "4", "6"]  # round steps past 5
    assert chart.unit == "jobs per hour"
    assert len(chart.x_ticks) == 3
    assert chart.summary == "This hour: 5 finished, 1 failed."


def test_latency_draws_p50_and_p95_with_a_labelled_seconds_scale() -> None:
    now = time.time()
    start = now - now % 3600
    buckets = [OutcomeBucket(start - 3600, 2, 2, 0, 0.5, 1.0),
               OutcomeBucket(start, 1, 1, 0, 90, 95)]  # fmt: skip
    chart = charts.latency(buckets, now - 7200, now, 3600)
    assert [line.kind for line in chart.lines] == ["p50", "p95"]
    assert all(len(line.points.split()) == 2 for line in chart.lines)
    assert chart.y_ticks[-1].text == "100.0 s"
    assert chart.summary.endswith("p50 90.0 s, p95 95.0 s.")
    assert "p50 500 ms, p95 1.0 s (2 jobs)" in chart.columns[-2].label
    assert charts.seconds_text(0.25) == "250 ms"
    assert charts.seconds_text(600) == "10.0 min"


def test_a_single_interval_with_data_is_still_a_chart_to_read() -> None:
    now = time.time()
    chart = charts.latency([OutcomeBucket(now - now % 3600, 1, 1, 0, 3.0, 3.0)],
                           now - 86400, now, 3600)  # fmt: skip
    assert len(chart.y_ticks) >= 3
    assert chart.y_ticks[-1].text == "3.0 s"
    assert chart.summary.endswith("p50 3.0 s, p95 3.0 s.")
    assert not chart.empty


def test_errors_keep_the_most_frequent_codes_apart_and_sum_the_rest() -> None:
    now = time.time()
    start = now - now % 3600
    found = [ErrorBucket(start, f"code_{n}", n + 1) for n in range(7)]
    chart = charts.errors(found, now - 3600, now, 3600)
    names = [name for _, name in chart.legend]
    assert names[:2] == ["code_6 (7)", "code_5 (6)"]
    assert names[-1] == "other (3)"  # code_0 and code_1
    (column,) = [c for c in chart.columns if c.marks]
    assert sum(m.height for m in column.marks) == pytest.approx(
        (charts.BOTTOM - charts.TOP) * 28 / float(chart.y_ticks[-1].text)
    )
    assert charts.errors([], now - 3600, now, 3600).summary == "No errors in this period."


def test_scales_end_on_a_round_step_at_or_above_the_top() -> None:
    assert charts.scale(0, whole=True) == (1.0, [0.0, 1.0])
    assert charts.scale(19, whole=True) == (20.0, [0.0, 5.0, 10.0, 15.0, 20.0])
    assert charts.scale(0.9, whole=False)[0] == pytest.approx(1.0)
