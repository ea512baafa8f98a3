"""The console as an operator uses it, in Chromium: jobhook with the simulator as its provider,
signed webhooks from the simulator, a handler destination that is down until the test says.

Each test looks at the page as a user would (roles, labels, visible text), not at markup.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

from tests.adminsupport import TOKEN
from tests.console.browser import (
    API_KEY,
    DOCS,
    PHONE,
    World,
    chromium_browser,
    docs_mode,
    shots_dir,
    world,
)
from tests.console.support import XSS
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from playwright.async_api import Browser, Dialog, Page

# One browser for the module: every test runs in the module's event loop, which owns it.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium_browser() as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def w(tmp_path: Path, browser: Browser) -> AsyncIterator[World]:
    async with world(tmp_path, browser) as running:
        yield running


async def _finished(w: World, job_ids: list[str]) -> None:
    """Wait until each job's file delivery succeeded and its hook delivery is done or dead."""
    for job_id in job_ids:
        await w.delivered(job_id, "files", "succeeded")


async def test_log_in_list_filter_and_read_a_jobs_timeline(w: World) -> None:
    good = w.jobs(3, metadata={"customer": "acme"})
    bad = w.jobs(1, outcome="failed", error_code="DOCUMENT_CORRUPT")
    await _finished(w, good + bad)
    page = await w.logged_in()
    rows = page.locator("table.jobs tbody tr")
    assert await rows.count() == 4
    await page.get_by_label("State").select_option("failed")
    await page.get_by_role("button", name="Filter").click()
    await page.wait_for_url("**/ui/jobs?state=failed")
    assert await rows.count() == 1
    assert await rows.first.get_by_text(bad[0]).is_visible()
    await page.get_by_role("link", name="Clear").click()
    await page.get_by_label("Metadata").fill("customer=acme")
    await page.get_by_role("button", name="Filter").click()
    await page.wait_for_url("**/ui/jobs?metadata=customer%3Dacme")
    assert await rows.count() == 3

    await page.get_by_role("link", name=good[0]).click()
    timeline = page.locator("ol.timeline")
    assert await timeline.get_by_text("Webhook delivered").count() >= 1
    assert await timeline.get_by_text("message msg_").count() >= 1
    assert await timeline.get_by_text("Handler files, attempt 1").is_visible()
    assert await timeline.get_by_text("Handler hook, attempt 1").is_visible()
    assert await timeline.get_by_text("Result confirmed and fetched").is_visible()
    assert await page.get_by_text("customer").first.is_visible()


async def test_a_dead_delivery_is_replayed_from_the_page_and_then_delivered(w: World) -> None:
    (job_id,) = w.jobs(1)
    await w.delivered(job_id, "hook", "dead")
    page = await w.logged_in()
    await page.get_by_role("link", name="Dead letters").click()
    dead_rows = page.locator("main table").last.locator("tbody tr")
    assert await dead_rows.get_by_text(job_id).is_visible()
    w.destination.up = True
    await page.get_by_role("button", name="Count what would be replayed").click()
    assert await page.get_by_text("1 dead deliveries").is_visible()
    await page.get_by_role("button", name="Replay 1 deliveries").click()
    assert await page.get_by_text("Queued 1 deliveries again.").is_visible()
    await w.delivered(job_id, "hook", "succeeded")
    await page.goto(f"{w.url}/ui/jobs/reducto/{job_id}")
    handlers = page.locator("table").first
    assert await handlers.locator("tr", has_text="hook").get_by_text("succeeded").is_visible()
    assert await page.get_by_text("Handler hook, attempt 1").count() == 2  # dead, then delivered
    assert len(w.destination.received) == 1


async def test_a_job_is_replayed_to_one_handler_from_its_page(w: World) -> None:
    (job_id,) = w.jobs(1)
    await w.delivered(job_id, "hook", "dead")
    w.destination.up = True
    page = await w.logged_in()
    await page.goto(f"{w.url}/ui/jobs/reducto/{job_id}")
    await page.get_by_role("button", name="Replay to hook").click()
    assert await page.get_by_text("Queued 1 deliveries again.").is_visible()
    await w.delivered(job_id, "hook", "succeeded")
    await page.reload()
    row = page.locator("table").first.locator("tr", has_text="hook")
    assert await row.get_by_text("succeeded").is_visible()


async def test_a_live_completion_appears_without_reload(w: World) -> None:
    page = await w.logged_in()
    await page.get_by_role("link", name="Live").click()
    await page.get_by_text("Live.", exact=True).wait_for()
    await page.evaluate("window.sameDocument = true")
    (job_id,) = w.jobs(1)
    await page.locator("#live tbody").get_by_role("link", name=job_id).wait_for(timeout=20_000)
    assert await page.evaluate("window.sameDocument === true")  # no reload happened


async def test_an_xss_payload_in_metadata_renders_as_text(w: World) -> None:
    (job_id,) = w.jobs(1, metadata=dict(XSS))
    await _finished(w, [job_id])
    page = await w.logged_in()
    dialogs: list[str] = []

    async def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", dismiss)
    await page.reload()
    assert await page.get_by_text(XSS["script"]).first.is_visible()
    await page.goto(f"{w.url}/ui/jobs/reducto/{job_id}")
    for text in XSS.values():
        assert await page.locator("main").get_by_text(text, exact=True).is_visible()
    assert await page.locator("main img").count() == 0
    await page.goto(f"{w.url}/ui/live")
    await page.goto(f"{w.url}/ui/dead")
    assert dialogs == []


async def test_after_logout_every_page_redirects_to_login(w: World) -> None:
    page = await w.logged_in()
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url("**/ui/login?done=logged_out")
    for path in ("/ui/", "/ui/jobs", "/ui/jobs/reducto/x", "/ui/dead", "/ui/overview",
                 "/ui/live", "/ui/static/console.js"):  # fmt: skip
        await page.goto(f"{w.url}{path}")
        assert "/ui/login?next=" in page.url, path
        assert await page.get_by_label("Admin token").is_visible()


async def test_times_show_in_the_browsers_zone_with_utc_on_hover(w: World) -> None:
    (job_id,) = w.jobs(1)
    await _finished(w, [job_id])
    page = await w.logged_in(timezone_id="Asia/Kolkata")  # UTC+05:30 all year
    first = page.locator("table.jobs tbody time").first
    utc = await first.get_attribute("datetime")
    assert utc is not None
    title = await first.get_attribute("title")
    assert title is not None
    assert title.endswith("(UTC)")
    assert title.startswith(utc[:16].replace("T", " "))
    shown = await first.inner_text()
    assert shown[:16] != utc[:16].replace("T", " ")  # shifted by 5:30
    assert shown[14:16] == f"{(int(utc[14:16]) + 30) % 60:02d}"


async def test_the_pages_work_from_the_keyboard(w: World) -> None:
    page = await w.logged_in()
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Skip to content"
    names = []
    for _ in range(7):
        await page.keyboard.press("Tab")
        names.append(await page.evaluate("document.activeElement.textContent.trim()"))
    # The admin token sees the audit trail's page; the name of who is signed in is not a stop.
    assert names == ["jobhook", "Jobs", "Dead letters", "Overview", "Live", "Audit", "Log out"]
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Shift+Tab")
    await page.keyboard.press("Enter")  # "Live", from the keyboard
    await page.wait_for_url("**/ui/live")


async def test_no_secret_reaches_any_page(w: World) -> None:
    (job_id,) = w.jobs(1)
    await w.delivered(job_id, "hook", "dead")
    page = await w.logged_in()
    for path in ("/ui/jobs", f"/ui/jobs/reducto/{job_id}", "/ui/dead", "/ui/overview",
                 "/ui/live", "/ui/static/console.js"):  # fmt: skip
        await page.goto(f"{w.url}{path}")
        html = await page.content()
        for secret in (TOKEN, SECRET.removeprefix("whsec_"), API_KEY):
            assert secret not in html, path
    cookies = await page.context.cookies()
    assert [c["name"] for c in cookies] == ["jobhook_console"]
    assert cookies[0]["httpOnly"]
    assert cookies[0]["sameSite"] == "Strict"
    assert TOKEN not in cookies[0]["value"]


async def _shoot(page: Page, name: str) -> None:
    await page.screenshot(path=str(shots_dir() / f"{name}.png"), full_page=False)


@pytest.mark.skipif(
    not docs_mode(),
    reason="makes the docs' images only when JOBHOOK_CONSOLE_SHOTS names their folder",
)
async def test_screenshots_for_the_docs(w: World) -> None:
    """With JOBHOOK_CONSOLE_SHOTS set (docs/img/console): each page light at 1024 px, the jobs
    at phone width, the login page. (tests/console/test_layout.py photographs every page at
    every width and scheme in each run.)"""
    good = w.jobs(6, metadata={"customer": "acme", "batch": "2026-11"})
    bad = w.jobs(2, outcome="failed", error_code="DOCUMENT_CORRUPT")
    await _finished(w, good + bad)
    await w.delivered(good[0], "hook", "dead")
    pages = [("jobs", "/ui/jobs"), ("job", f"/ui/jobs/reducto/{good[0]}"), ("dead", "/ui/dead"),
             ("overview", "/ui/overview"), ("live", "/ui/live")]  # fmt: skip
    page = await w.logged_in(DOCS, color_scheme="light")
    for name, path in pages:
        await page.goto(f"{w.url}{path}")
        await _shoot(page, name)
    phone = await w.logged_in(PHONE)
    await _shoot(phone, "jobs-phone")
    login = await w.page(DOCS)
    await login.goto(f"{w.url}/ui/")
    await _shoot(login, "login")
    assert all((shots_dir() / f"{name}.png").stat().st_size for name, _ in pages)


async def test_a_replay_while_the_circuit_is_open_probes_at_once_and_says_how_it_went(
    w: World,
) -> None:
    job_ids = w.jobs(5)  # five dead deliveries open the hook's circuit (30 s cool-down)
    for job_id in job_ids:
        await w.delivered(job_id, "hook", "dead")
    page = await w.logged_in()
    await page.get_by_role("link", name="Dead letters").click()
    assert await page.get_by_text("Handler hook: circuit open since").is_visible()
    await page.goto(f"{w.url}/ui/jobs/reducto/{job_ids[0]}")
    await page.get_by_role("button", name="Replay to hook").click()
    await page.get_by_text("one probe went at once and failed").wait_for()
    row = page.locator("table").first.locator("tr", has_text="hook")
    assert await row.get_by_text("held: circuit open since").is_visible()
    assert await row.get_by_text("at the circuit's probe").is_visible()
    assert await page.get_by_text("Handler hook, attempt 1 (circuit probe)").is_visible()
    w.destination.up = True  # the operator fixed the destination: the next replay gets through
    started = time.monotonic()
    await page.get_by_role("button", name="Replay to hook").click()
    await page.get_by_text("one probe went at once and got through").wait_for()
    assert time.monotonic() - started < 10  # not after the 30 s cool-down
    await w.delivered(job_ids[0], "hook", "succeeded")
    assert w.destination.received  # the probe, then the held deliveries


async def test_the_jobs_list_announces_new_and_changed_jobs_and_shows_them_in_place(
    w: World,
) -> None:
    (first,) = w.jobs(1)
    await _finished(w, [first])
    page = await w.logged_in()
    await page.evaluate("window.sameDocument = true")
    rows = page.locator("table.jobs tbody tr")
    assert await rows.count() == 1
    (second,) = w.jobs(1)
    bar = page.get_by_role("status").filter(has_text="since the page was loaded")
    await bar.get_by_text("1 new").wait_for(timeout=20_000)
    assert await rows.count() == 1  # announced, nothing moved yet
    await bar.get_by_role("button", name="Show").click()
    assert await rows.count() == 2
    assert await page.locator("table.jobs tr.fresh").get_by_role("link", name=second).is_visible()
    assert await page.evaluate("window.sameDocument === true")  # no reload happened
