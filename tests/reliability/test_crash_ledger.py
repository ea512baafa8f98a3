"""SIGKILL at random moments under a steady stream of webhooks: nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from tests.reliability.ledger import HANDLERS, Plan, run_ledger, stored_state
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SHORT = Plan(kills=5, rate=50, uptime=(1.0, 3.0), seed=11)
LONG = Plan(kills=50, rate=200, uptime=(1.0, 5.0), seed=5, log_level="warning")


async def _check_ledger(
    tmp_path: Path, plan: Plan, report: Callable[[str], None], seconds: float
) -> None:
    # pytest-timeout's exception lands in whichever task runs when it fires (a sender's, say),
    # where it is lost; a deadline of the test's own ends a stuck run as a failure instead.
    async with asyncio.timeout(seconds):
        figures, service, _, sender = await run_ledger(tmp_path, plan)
    report(figures.line())
    assert figures.kills == plan.kills
    assert figures.lost == 0, f"acknowledged but never delivered: {figures.line()}"
    assert figures.unacknowledged == 0, "a webhook never got a 2xx although it was retried"
    assert figures.server_errors == 0, f"5xx answers: {figures.statuses}"
    # A handler is called twice only for work that was claimed when a kill landed.
    assert figures.duplicates <= figures.claimed_at_kills, figures.line()
    messages, states = stored_state(tmp_path / "data" / "jobhook.db")
    acked_messages = {"msg-" + job.removeprefix("job-") for job in sender.acked}
    assert acked_messages <= messages, "a 2xx was given for a delivery the store does not hold"
    assert states == {"succeeded": len(sender.acked) * len(HANDLERS)}
    log = service.log_text()
    assert service.starts == plan.kills + 1
    assert SECRET.removeprefix("whsec_") not in log


@pytest.mark.timeout(150)
async def test_sigkill_at_random_moments_loses_no_acknowledged_webhook(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _check_ledger(tmp_path, SHORT, report_figures, seconds=140)


@pytest.mark.reliability
@pytest.mark.timeout(1200)
async def test_fifty_sigkills_under_200_webhooks_a_second_lose_nothing(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _check_ledger(tmp_path, LONG, report_figures, seconds=1150)
