"""``jobhook demo`` runs as a new user would run it, and every job reaches its handler."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from receiver.cli.demo import run_demo


@pytest.mark.timeout(90)
async def test_demo_delivers_every_job_by_webhook_or_poller() -> None:
    output = io.StringIO()
    summary = await run_demo(8, 0.3, 60.0, Console(file=output, width=100))
    assert summary["results_written"] == 8
    assert summary["completed_by_webhook"] + summary["completed_by_poller"] == 8
    assert summary["completed_by_poller"] > 0, "no webhook was lost, so the poller did nothing"
    assert "All 8/8 jobs delivered" in output.getvalue()
