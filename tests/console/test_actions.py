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
from receiver.store.rows import TimeBucket
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


def test_throughput_has_one_bar_per_interval_including_empty_ones() -> None:
    now = 1_700_000_000.0
    since = now - 24 * 3600
    start = now - now % 3600
    chart = charts.throughput([TimeBucket(start, 4, 1.0, 2.0)], since, now, 3600)
    assert len(chart.bars) == 25
    assert [b.height > 0 for b in chart.bars].count(True) == 1
    assert chart.top == "4"
    assert "4 completed" in chart.bars[-1].label


def test_latency_is_a_line_through_the_intervals_that_have_jobs() -> None:
    now = time.time()
    start = now - now % 3600
    chart = charts.latency([TimeBucket(start - 3600, 2, 0.5, 1.0), TimeBucket(start, 1, 90, 90)],
                           now - 7200, now, 3600)  # fmt: skip
    assert len(chart.line.split()) == 2
    assert chart.top == "90.0 s"
    assert charts.seconds_text(0.25) == "250 ms"
    assert charts.seconds_text(600) == "10.0 min"
