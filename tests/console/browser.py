"""The browser tests' world: jobhook (real app, uvicorn on loopback, SQLite) with the Reducto
simulator as its provider, a handler destination that can be taken down, and Debian's Chromium
driven by Playwright.

Without Chromium or Playwright the tests skip with the reason; under
``JOBHOOK_REQUIRE_SERVICES=1`` (``.ci/run``, which installs Chromium) they fail instead.
The docs' screenshots go to ``JOBHOOK_CONSOLE_SHOTS`` (set only to make them); the layout test
photographs every page into its own ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.config.settings import Settings
from receiver.service.app import create_app
from receiver.service.serving import free_port, serving
from tests.adminsupport import TOKEN
from tests.services import services_required
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from playwright.async_api import Browser, BrowserContext, Page
    from starlette.requests import Request

    from receiver.sim import Simulator
    from receiver.store import Store

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
API_KEY = "sim-api-key-7c1d"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
DOCS = {"width": 1024, "height": 720}


def chromium() -> str:
    """The system Chromium's path, after checking Playwright is importable; skip (or fail
    under JOBHOOK_REQUIRE_SERVICES=1) when either is missing."""
    reason = None
    path = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed: uv sync --group dev"
    if reason is None and not Path(path).exists():
        reason = "Chromium is not installed: apt-get install chromium"
    if reason is not None:
        if services_required():
            pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes the browser tests mandatory")
        pytest.skip(reason)
    return path


def docs_mode() -> bool:
    """Screenshots for the docs (``JOBHOOK_CONSOLE_SHOTS`` names where), not test artefacts."""
    return bool(os.environ.get("JOBHOOK_CONSOLE_SHOTS"))


def shots_dir() -> Path:
    """Where the docs' screenshots go (``JOBHOOK_CONSOLE_SHOTS``, relative to the repository)."""
    folder = Path(os.environ["JOBHOOK_CONSOLE_SHOTS"])
    folder = folder if folder.is_absolute() else REPO / folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Destination:
    """The ``hook`` handler's HTTP destination: 503 while down, 200 when up."""

    up: bool = False
    received: list[bytes] = field(default_factory=list)

    def app(self) -> Starlette:
        async def hook(request: Request) -> JSONResponse:
            if not self.up:
                return JSONResponse({"error": "down for the test"}, status_code=503)
            self.received.append(await request.body())
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])


@dataclass
class World:
    url: str
    sim: Simulator
    store: Store
    destination: Destination
    browser: Browser
    contexts: list[BrowserContext] = field(default_factory=list)
    """The browser contexts this test opened, closed when it ends (the browser is shared)."""

    async def page(self, viewport: dict[str, int] = DESKTOP, **options: Any) -> Page:
        context = await self.browser.new_context(viewport=viewport, **options)
        self.contexts.append(context)
        return await context.new_page()

    async def logged_in(self, viewport: dict[str, int] = DESKTOP, **options: Any) -> Page:
        page = await self.page(viewport, **options)
        await page.goto(f"{self.url}/ui/")
        await page.get_by_label("Admin token").fill(TOKEN)
        await page.get_by_role("button", name="Log in").click()
        await page.wait_for_url(f"{self.url}/ui/jobs")
        return page

    def jobs(self, count: int = 1, **options: Any) -> list[str]:
        return self.sim.create_jobs(count, duration=0.2, **options)

    async def until(self, check: Callable[[], Any], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not await check():
            assert time.monotonic() < deadline, "the condition did not come true in time"
            await asyncio.sleep(0.1)

    async def delivered(self, job_id: str, handler: str, state: str) -> None:
        async def done() -> bool:
            rows = await self.store.dispatches_for("reducto", job_id)
            return any(d.handler == handler and d.state == state for d in rows)

        await self.until(done)


def settings(tmp: Path, sim_url: str, hook_url: str) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": str(tmp / "data"),
            "server": {"admin_token": TOKEN},
            "results": {"allowed_hosts": ["127.0.0.1"], "allow_http": True,
                        "allow_private_networks": True},
            "sources": {"reducto": {
                "provider": "reducto", "secrets": [SECRET], "api_base_url": sim_url,
                "api_key": API_KEY,
                "poll": {"grace_seconds": 2.0, "initial_delay": 0.5, "max_delay": 2.0,
                         "requests_per_minute": 600},
            }},
            "handlers": [
                {"name": "files", "type": "file", "dir": str(tmp / "out")},
                {"name": "hook", "type": "http", "url": hook_url, "max_attempts": 1},
            ],
            "log": {"level": "warning"},
        },
        context={"env": {}},
    )  # fmt: skip


@contextlib.asynccontextmanager
async def chromium_browser() -> AsyncIterator[Browser]:
    """The system Chromium under Playwright, for a whole test module (skips without it)."""
    executable = chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@contextlib.asynccontextmanager
async def world(tmp: Path, browser: Browser) -> AsyncIterator[World]:
    """Everything running for one test in the module's ``browser``, stopped afterwards."""
    from receiver.sim import Simulator, build_app

    port = free_port()
    sim = Simulator("reducto", api_key=API_KEY, secret=SECRET, seed=1, duration=0.2,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto",
                    result_bytes=2048)  # fmt: skip
    destination = Destination()
    async with (
        serving(build_app(sim)) as sim_url,
        serving(destination.app()) as hook_base,
    ):
        app = create_app(settings(tmp, sim_url, f"{hook_base}/hook"))
        async with serving(app, port=port) as url:
            running = World(url, sim, app.state.store, destination, browser)
            try:
                yield running
            finally:
                for context in running.contexts:
                    await context.close()
