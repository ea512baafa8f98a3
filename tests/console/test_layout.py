"""Every console page at phone and desktop widths, light and dark, looked at as boxes: no two
sibling layout boxes (panels, tables, charts, tiles) intersect, nothing spills out of its panel,
and the page never scrolls sideways. The data is the console demo's (two providers, failed
jobs, a weak field, dead deliveries, an open circuit), so every panel has something in it.

One browser for the module; each page is loaded once per width and colour scheme, checked and
photographed into the test's ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from receiver.cli.demo_console import HANDLER, console_demo, guide
from tests.console.browser import chromium_browser

if TYPE_CHECKING:
    from playwright.async_api import Page

    from receiver.cli.demo_console import ConsoleDemo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WIDTHS = (390, 1280, 1920)
SCHEMES = ("light", "dark")
HEIGHT = 900

_SOURCE = (Path(__file__).parent / "layout.js").read_text()
LAYOUT = _SOURCE[_SOURCE.index("() =>") :]  # the function, without the comment above it

BROKEN = """<!doctype html><meta name="viewport" content="width=device-width">
<main><div class="grid" style="display:grid;grid-template-columns:1fr 1fr;gap:8px">
<section class="panel"><table style="width:900px"><tr><td>wide</td></tr></table></section>
<section class="panel">next</section></div>
<div class="charts" style="display:flex">
<figure class="chart" style="width:200px;margin-right:-80px">a</figure>
<figure class="chart" style="width:200px">b</figure></div></main>"""


async def _ready(demo: ConsoleDemo) -> None:
    """Every job terminal and resolved, and the downstream handler's circuit open."""
    store = demo.app.state.store
    deadline = time.monotonic() + 60
    while True:
        jobs = [await store.get_job(s, j) for s, ids in demo.jobs.items() for j in ids]
        backlog = await store.backlog()
        circuits = {c.handler: c.state for c in await store.circuits()}
        if (
            all(j is not None and j.terminal_at is not None for j in jobs)
            and backlog.resolving == 0
            and backlog.dead > 0
            and circuits.get(HANDLER) == "open"
        ):
            return
        assert time.monotonic() < deadline, (backlog, circuits)
        await asyncio.sleep(0.2)


async def _log_in(page: Page, demo: ConsoleDemo) -> None:
    await page.goto(demo.ui_url)
    await page.get_by_label("Admin token").fill(demo.token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url("**/ui/jobs")


async def test_no_page_has_overlapping_boxes_or_scrolls_sideways(tmp_path: Path) -> None:
    async with (
        chromium_browser() as browser,
        console_demo(jobs=5, drop=0.0, down_seconds=3600) as demo,
    ):
        check = await browser.new_page(viewport={"width": 390, "height": HEIGHT})
        await check.set_content(BROKEN)
        found: list[str] = await check.evaluate(LAYOUT)
        # The check itself sees a table spilling out of its panel, two overlapping charts
        # and the sideways scroll they cause.
        assert any("spills out of" in p for p in found), found
        assert any("figure.chart overlaps figure.chart" in p for p in found), found
        assert any("scrolls sideways" in p for p in found), found
        await check.close()

        await _ready(demo)
        job = next(j for j in demo.jobs["docextract"])
        pages = {"jobs": "/ui/jobs", "job": f"/ui/jobs/docextract/{job}", "dead": "/ui/dead",
                 "overview": "/ui/overview", "live": "/ui/live"}  # fmt: skip
        problems: dict[str, list[str]] = {}
        complaints: list[str] = []

        async def look(scheme: str) -> None:
            context = await browser.new_context(
                viewport={"width": WIDTHS[0], "height": HEIGHT}, color_scheme=scheme
            )
            page = await context.new_page()
            # Nothing the CSP blocks, nothing missing (the favicon included).
            page.on("console", lambda m: m.type == "error" and complaints.append(m.text))
            page.on("response", lambda r: r.status >= 400 and complaints.append(r.url))
            await page.goto(demo.ui_url)
            await _shoot(page, tmp_path, problems, f"login-{scheme}")
            await _log_in(page, demo)
            for width in WIDTHS:
                await page.set_viewport_size({"width": width, "height": HEIGHT})
                for name, path in pages.items():
                    await page.goto(demo.url + path)
                    await _shoot(page, tmp_path, problems, f"{name}-{width}-{scheme}")
            if scheme == SCHEMES[0]:
                await _overview_as_the_demo_says(page, demo)
            await context.close()

        await asyncio.gather(*(look(scheme) for scheme in SCHEMES))
    assert problems == {}
    assert complaints == []
    assert len(list(tmp_path.glob("*.png"))) == len(SCHEMES) * (1 + len(WIDTHS) * len(pages))


async def _overview_as_the_demo_says(page: Page, demo: ConsoleDemo) -> None:
    """The Overview shows what the demo's guide announces (total's p10 marked under 0.80, the
    open circuit), an interval's values when it has keyboard focus; a failed job's error
    names its code once."""
    store = demo.app.state.store
    for job_id in demo.jobs["docextract"]:
        row = await store.get_job("docextract", job_id)
        if row is not None and row.state == "failed":
            await page.goto(f"{demo.url}/ui/jobs/docextract/{job_id}")
            error = await page.locator("dt", has_text="Error").locator("+ dd").inner_text()
            code = error.split(" ", 1)[0]
            assert error.count(code) == 1, error
    await page.goto(demo.url + "/ui/overview")
    total = page.locator("tr", has_text="total").filter(has_text="docextract")
    assert (await total.locator("td.low").inner_text()).startswith("0.62 < 0.80")
    assert 'field "total" with its p10 (0.62)' in " ".join(guide(demo, 0).split())
    # The demo's circuit probes every few seconds: the banner says when the next probe is due
    # while it is open, and that one is out while it is half-open (for the probe's attempt).
    banner = page.get_by_role("status").filter(has_text=f"Handler {HANDLER}: circuit")
    said = " ".join((await banner.inner_text()).split())
    assert ("circuit open since" in said and "next probe at" in said) or (
        "circuit half-open: a probe is out" in said
    ), said
    column = page.locator("#chart-2 g.col").last
    tip = column.locator("text.tip")
    assert not await tip.is_visible()
    await column.focus()
    assert await tip.is_visible()
    text = await tip.text_content() or ""
    assert "p50" in text
    assert "p95" in text


async def _shoot(page: Page, folder: Path, problems: dict[str, Any], name: str) -> None:
    found = await page.evaluate(LAYOUT)
    if found:
        problems[name] = found
    await page.screenshot(path=str(folder / f"{name}.png"))
