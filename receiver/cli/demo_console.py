"""``jobhook demo --console``: the operator console with something to do in it.

Two simulated providers (Reducto, and DocExtract whose failed jobs can be reprocessed) and a
downstream HTTP service that is down for its first ``DOWN_SECONDS``, all on loopback in one
process. Jobs fail at the provider with several error codes, deliveries to the downstream
service go dead and its circuit opens, so a user can find a failed job, replay a dead delivery
once the service is back, and reprocess a DocExtract job. ``console_demo`` sets it up and tears
it down (the tests use it); ``run_console_demo`` prints what to try and serves until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rich.table import Table
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from receiver.cli.demo_setup import LiveTable, demo_config, invocation, track
from receiver.config.settings import Settings
from receiver.service.app import create_app
from receiver.service.serving import free_port, serving
from receiver.store.rows import JobFilter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from rich.console import Console
    from starlette.requests import Request

    from receiver.sim import Simulator

DOWN_SECONDS = 20.0
"""How long the downstream service answers 503 after the jobs are submitted."""
HANDLER = "downstream"
DOCEXTRACT_OK = 6  # job numbers 0-5: number 3 has a weak ``total`` (0.62)
DOCEXTRACT_FAILED = {"processing_timeout": 2, "extraction_failed": 2}
DEAD_AT_LEAST = 3


class Destination:
    """A downstream service that answers 503 until ``back_at``, then 200 to every POST."""

    def __init__(self, down_seconds: float) -> None:
        self.back_at = time.monotonic() + down_seconds
        self.refused = 0
        self.accepted = 0
        self.app = Starlette(routes=[Route("/", self._receive, methods=["POST"])])

    @property
    def up(self) -> bool:
        return time.monotonic() >= self.back_at

    def recover(self) -> None:
        """Come back now."""
        self.back_at = min(self.back_at, time.monotonic())

    async def _receive(self, request: Request) -> PlainTextResponse:
        await request.body()
        if not self.up:
            self.refused += 1
            return PlainTextResponse("down for maintenance", status_code=503)
        self.accepted += 1
        return PlainTextResponse("ok")


@dataclass
class ConsoleDemo:
    """A running console demo: where it is, its parts, and the jobs it made per source."""

    url: str
    token: str
    app: Starlette
    sims: dict[str, Simulator]
    destination: Destination
    jobs: dict[str, list[str]]

    @property
    def ui_url(self) -> str:
        return f"{self.url}/ui/"


def console_settings(
    data_dir: Path, sim_urls: dict[str, str], keys: dict[str, str], secret: str, token: str,
    destination_url: str, deliveries: int,
) -> Settings:  # fmt: skip
    config = demo_config(data_dir, sim_urls["reducto"], secret, keys["reducto"], token)
    config["sources"]["docextract"] = {
        **config["sources"]["reducto"],
        "provider": "docextract", "api_base_url": sim_urls["docextract"],
        "api_key": keys["docextract"],
    }  # fmt: skip
    # Two attempts a delivery and a short backoff: dead letters within seconds. A probe of an
    # open circuit spends no attempt, so the circuit opens only after a few more failures than
    # there are deliveries (at least DEAD_AT_LEAST are dead by then); it probes every 3 s until
    # the service is back, and the deliveries still waiting then go through.
    config["handlers"].append(
        {"name": HANDLER, "type": "http", "url": destination_url + "/", "timeout": 5.0,
         "max_attempts": 2, "backoff_initial": 0.5, "backoff_max": 1.0,
         "circuit_failures": deliveries + DEAD_AT_LEAST, "circuit_cooldown_seconds": 3.0}
    )  # fmt: skip
    return Settings.model_validate(config, context={"env": {}})


@contextlib.asynccontextmanager
async def console_demo(
    jobs: int = 12, drop: float = 0.3, *, down_seconds: float = DOWN_SECONDS
) -> AsyncIterator[ConsoleDemo]:
    """Serve the console demo for the block; the jobs are submitted and tracked on entry."""
    from receiver.sim import Simulator, build_app

    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    keys = {name: secrets.token_urlsafe(16) for name in ("reducto", "docextract")}
    token = secrets.token_urlsafe(24)
    port = free_port()
    hook = f"http://127.0.0.1:{port}/webhooks"
    sims = {
        "reducto": Simulator("reducto", api_key=keys["reducto"], secret=secret, drop=drop,
                             seed=1, webhook_url=f"{hook}/reducto", duration=4.0,
                             result_bytes=512 * 1024),
        "docextract": Simulator("docextract", api_key=keys["docextract"], secret=secret,
                                drop=drop, seed=2, webhook_url=f"{hook}/docextract",
                                duration=3.0, requests_per_minute=6000),
    }  # fmt: skip
    destination = Destination(down_seconds)
    with tempfile.TemporaryDirectory(prefix="jobhook-demo-") as tmp:
        async with contextlib.AsyncExitStack() as stack:
            sim_urls = {name: await stack.enter_async_context(serving(build_app(sim)))
                        for name, sim in sims.items()}  # fmt: skip
            destination_url = await stack.enter_async_context(serving(destination.app))
            ok, failing = _reducto_plan(jobs)
            deliveries = ok + failing + DOCEXTRACT_OK + sum(DOCEXTRACT_FAILED.values())
            settings = console_settings(
                Path(tmp), sim_urls, keys, secret, token, destination_url, deliveries
            )
            app = create_app(settings)
            url = await stack.enter_async_context(serving(app, port=port))
            destination.back_at = time.monotonic() + down_seconds
            made = {"reducto": _reducto_jobs(sims["reducto"], jobs),
                    "docextract": _docextract_jobs(sims["docextract"])}  # fmt: skip
            for source, job_ids in made.items():
                await track(app, source, job_ids)
            yield ConsoleDemo(url, token, app, sims, destination, made)


def _reducto_plan(jobs: int) -> tuple[int, int]:
    """How many Reducto jobs succeed and how many fail (one in five, at least one each)."""
    failing = max(1, jobs // 5)
    return max(jobs - failing, 1), failing


def _reducto_jobs(sim: Simulator, jobs: int) -> list[str]:
    ok, failing = _reducto_plan(jobs)
    job_ids = sim.create_jobs(ok, result="url")
    return job_ids + sim.create_jobs(failing, outcome="failed", error_code="DOCUMENT_CORRUPT")


def _docextract_jobs(sim: Simulator) -> list[str]:
    job_ids = sim.create_jobs(DOCEXTRACT_OK)
    for code, count in DOCEXTRACT_FAILED.items():
        job_ids += sim.create_jobs(count, outcome="failed", error_code=code)
    return job_ids


def guide(demo: ConsoleDemo, down_seconds: float) -> str:
    """What to try once the jobs have ended (rich markup); the downstream service is back in
    ``down_seconds``."""
    env = f"JOBHOOK_URL={demo.url} JOBHOOK_ADMIN_TOKEN={demo.token} {invocation()}"
    back = "now" if down_seconds <= 0 else f"after ~{down_seconds:.0f} s"
    return f"""
[bold]Operator console:[/] {demo.ui_url}
[bold]Admin token:[/] {demo.token}   (paste it on the login page)

Things to try in the console:
  1. [bold]Jobs[/] → state "failed": find a failed job and open it to see why it failed.
  2. [bold]Dead letters[/] → replay once the destination is back ({back}): the "{HANDLER}"
     HTTP handler's service answers 503 until then, so its deliveries go dead and its
     circuit opens ([bold]Overview[/]); replayed, they show delivered.
  3. A failed [bold]docextract[/] job with processing_timeout → [bold]Reprocess[/]: a new job is
     submitted and succeeds, with reprocessed_from set (extraction_failed fails again).
  4. [bold]Overview[/]: errors by code over time, and the field "total" with its p10 (0.62)
     marked under the 0.80 threshold (one weak extraction in six: the alert rule, and the
     row's highlight, need a mean under 0.80 over at least 10 extractions).

From another terminal:
  {env} jobs stats
  {env} jobs ls --field total --max-confidence 0.8
"""


def status_table(demo: ConsoleDemo, started: float) -> Table:
    table = Table(title=f"jobhook demo --console — {time.monotonic() - started:4.0f}s")
    table.add_column("what")
    table.add_column("now", justify="right")
    for source, job_ids in demo.jobs.items():
        sim = demo.sims[source]
        words = [sim.status(j) for j in job_ids]
        done = sum(w.lower() in ("completed", "failed") for w in words)
        failed = sum(w.lower() == "failed" for w in words)
        table.add_row(f"{source} jobs finished at the provider (failed)",
                      f"{done}/{len(job_ids)} ({failed})")  # fmt: skip
    left = demo.destination.back_at - time.monotonic()
    state = "up (200)" if left <= 0 else f"down (503), back in {left:.0f} s"
    table.add_row(f"{HANDLER} service", state)
    table.add_row(f"{HANDLER} calls refused / accepted",
                  f"{demo.destination.refused} / {demo.destination.accepted}")  # fmt: skip
    circuit = demo.app.state.runtime.dispatcher.circuits.state(HANDLER)
    table.add_row(f"{HANDLER} circuit", circuit)
    return table


async def settled(demo: ConsoleDemo) -> bool:
    """Whether jobhook knows every job's end: succeeded, or failed with its error code."""
    for source, job_ids in demo.jobs.items():
        listed = await demo.app.state.store.list_jobs(JobFilter(source=source), limit=500)
        ended = {
            j.job.job_id
            for j in listed
            if j.job.state == "succeeded" or (j.job.state == "failed" and j.error_code)
        }
        if not ended.issuperset(job_ids):
            return False
    return True


async def run_console_demo(
    jobs: int, drop: float, seconds: float, console: Console,
    *, down_seconds: float = DOWN_SECONDS,
) -> NoReturn:  # fmt: skip
    """Run the console demo: its URL and token first, its state until every job has ended
    (at most ``seconds``), then what to try, and its state again until cancelled (Ctrl-C)."""
    async with console_demo(jobs, drop, down_seconds=down_seconds) as demo:
        # soft_wrap: the URL and the token stay whole on one line, to copy.
        console.print(f"Console: [bold]{demo.ui_url}[/] (admin token: {demo.token})",
                      soft_wrap=True)  # fmt: skip
        started = time.monotonic()
        with LiveTable(console, lambda: status_table(demo, started)) as live:
            while time.monotonic() - started < seconds and not await settled(demo):
                await asyncio.sleep(0.5)
                live.update()
        back = demo.destination.back_at - time.monotonic()
        console.print(guide(demo, back), soft_wrap=True)
        console.print(
            f"Still serving the console at {demo.ui_url}; Ctrl-C (SIGINT or SIGTERM) stops "
            "the demo.",
            soft_wrap=True,
        )
        with LiveTable(console, lambda: status_table(demo, started)) as live:
            while True:
                await asyncio.sleep(0.5)
                live.update()
