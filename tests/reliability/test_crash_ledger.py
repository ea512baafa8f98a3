"""SIGKILL at random moments under a steady stream of webhooks: nothing acknowledged is lost.

SQLite: one service, killed and restarted. PostgreSQL: three replicas behind a round-robin
sender, a random one killed and restarted each time, the others serving on.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from tests.reliability.ledger import HANDLERS, Plan, run_ledger
from tests.services import postgres_database
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

SHORT = Plan(kills=5, rate=50, uptime=(1.0, 3.0), seed=11)
# Two hundred kills leave a backlog of deliveries that takes minutes to drain once they stop.
LONG = Plan(kills=200, rate=50, uptime=(0.5, 2.5), seed=5, log_level="warning", drain_timeout=900)
REPLICAS_SHORT = Plan(kills=5, rate=10, uptime=(0.3, 1.0), startup_kills=0.5, seed=12, replicas=3,
                      drain_timeout=40)  # fmt: skip
REPLICAS_LONG = Plan(kills=200, rate=50, uptime=(0.5, 2.5), seed=6, replicas=3,
                     log_level="warning", drain_timeout=900)  # fmt: skip


async def _check_ledger(
    tmp_path: Path,
    plan: Plan,
    report: Callable[[str], None],
    seconds: float,
    store: str | None = None,
) -> None:
    # pytest-timeout's exception lands in whichever task runs when it fires (a sender's, say),
    # where it is lost; a deadline of the test's own ends a stuck run as a failure instead.
    async with asyncio.timeout(seconds):
        figures, services, _, sender = await run_ledger(tmp_path, plan, store)
    report(figures.line())
    assert figures.kills == plan.kills
    assert figures.lost == 0, f"acknowledged but never delivered: {figures.line()}"
    assert figures.unacknowledged == 0, "a webhook never got a 2xx although it was retried"
    assert figures.server_errors == 0, f"5xx answers: {figures.statuses}"
    # A handler is called twice only for work the killed process had claimed.
    assert figures.duplicates <= figures.claimed_at_kills, figures.line()
    messages, states = figures.stored
    acked_messages = {"msg-" + job.removeprefix("job-") for job in sender.acked}
    assert acked_messages <= messages, "a 2xx was given for a delivery the store does not hold"
    assert states == {"succeeded": len(sender.acked) * len(HANDLERS)}
    assert sum(s.starts for s in services) == plan.kills + plan.replicas
    for service in services:
        assert SECRET.removeprefix("whsec_") not in service.log_text()


@pytest.mark.timeout(150)
async def test_sigkill_at_random_moments_loses_no_acknowledged_webhook(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _check_ledger(tmp_path, SHORT, report_figures, seconds=140)


@pytest.mark.postgres
@pytest.mark.timeout(180)
async def test_sigkilled_postgres_replicas_lose_no_acknowledged_webhook(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    # Its time is mostly replica starts, which stretch with the machine's load: the deadline
    # leaves room for a heavily loaded machine (docs/reliability.md has the figures).
    async with postgres_database() as store:
        await _check_ledger(tmp_path, REPLICAS_SHORT, report_figures, seconds=170, store=store)


@pytest.mark.reliability
@pytest.mark.timeout(3600)
async def test_200_sigkills_under_50_webhooks_a_second_lose_nothing(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    await _check_ledger(tmp_path, LONG, report_figures, seconds=3550)


@pytest.mark.reliability
@pytest.mark.postgres
@pytest.mark.timeout(3600)
async def test_200_sigkills_over_three_postgres_replicas_lose_nothing(
    tmp_path: Path, report_figures: Callable[[str], None]
) -> None:
    async with postgres_database() as store:
        await _check_ledger(tmp_path, REPLICAS_LONG, report_figures, seconds=3550, store=store)
