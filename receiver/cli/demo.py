"""``jobhook demo``: the receiver and a simulated provider in one process, with lost webhooks.

Everything lives in a temporary directory and on loopback; nothing needs an account.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from receiver.cli.demo_setup import LiveTable, demo_settings, invocation, track
from receiver.service.app import create_app
from receiver.service.serving import free_port, serving

if TYPE_CHECKING:
    from rich.console import Console
    from starlette.applications import Starlette

    from receiver.sim import Simulator


def _table(sim: Simulator, app: Starlette, job_ids: list[str], started: float) -> Table:
    counts = app.state.ingestor.counts
    out = Path(app.state.settings.data_dir) / "out" / "reducto"
    delivered = sum((out / f"{j}.json").exists() for j in job_ids)
    table = Table(title=f"jobhook demo — {time.monotonic() - started:4.1f}s")
    table.add_column("what")
    table.add_column("count", justify="right")
    sent = [d for d in sim.deliveries if d.state == "delivered"]
    dropped = [d for d in sim.deliveries if d.state == "dropped"]
    finished = sum(sim.status(j) in ("Completed", "Failed") for j in job_ids)
    rows = [
        ("jobs submitted", len(job_ids)),
        ("finished at the provider", finished),
        ("webhooks delivered", len(sent)),
        ("webhooks lost (dropped on purpose)", len(dropped)),
        ("completed by webhook", counts["webhook", "completed"]),
        ("completed by poller", counts["poll", "completed"]),
        ("duplicate deliveries dropped", counts["webhook", "duplicate"]),
        ("results written by the file handler", delivered),
    ]  # fmt: skip
    for name, value in rows:
        table.add_row(name, str(max(value, 0)))
    return table


async def run_demo(
    jobs: int, drop: float, seconds: float, console: Console, *, ui: bool = False
) -> dict[str, int]:
    """Run the demo until every job's result is written (or ``seconds`` pass); with ``ui``,
    run the console demo instead (``receiver.cli.demo_console``): it serves until cancelled."""
    if ui:
        from receiver.cli.demo_console import run_console_demo

        await run_console_demo(jobs, drop, seconds, console)
    from receiver.sim import Simulator, build_app

    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    api_key = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="jobhook-demo-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        sim = Simulator("reducto", api_key=api_key, secret=secret, drop=drop, seed=1,
                        webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto", duration=4.0,
                        result_bytes=512 * 1024)  # fmt: skip
        async with serving(build_app(sim)) as sim_url:
            app = create_app(demo_settings(data_dir, sim_url, secret, api_key))
            async with serving(app, port=port):
                job_ids = sim.create_jobs(jobs, result="url")
                await track(app, "reducto", job_ids)
                console.print(
                    f"{jobs} job(s) submitted to a simulated Reducto that loses {drop:.0%} of "
                    f"its webhooks; waiting up to {seconds:g} s for every result.",
                    soft_wrap=True,
                )
                started = time.monotonic()
                out = data_dir / "out" / "reducto"
                with LiveTable(console, lambda: _table(sim, app, job_ids, started)) as live:
                    while time.monotonic() - started < seconds:
                        live.update()
                        if all((out / f"{j}.json").exists() for j in job_ids):
                            break
                        await asyncio.sleep(0.2)
                counts = app.state.ingestor.counts
                summary = {
                    "jobs": jobs,
                    "completed_by_webhook": counts["webhook", "completed"],
                    "completed_by_poller": counts["poll", "completed"],
                    "duplicates": counts["webhook", "duplicate"],
                    "results_written": sum((out / f"{j}.json").exists() for j in job_ids),
                }
    done = summary["results_written"] == jobs
    console.print(
        f"[bold]{'All' if done else 'Only'} {summary['results_written']}/{jobs} jobs delivered[/]: "
        f"{summary['completed_by_webhook']} by webhook, {summary['completed_by_poller']} by the "
        f"poller after {int(drop * 100)}% of webhooks were lost."
    )
    console.print(
        f"To browse these jobs in the operator console: {invocation()} demo --console",
        soft_wrap=True,
    )
    return summary
