"""An open circuit is visible everywhere an operator looks: ``/readyz`` (still ready),
``jobhook status``, ``/metrics`` and ``GET /jobs/stats``."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import httpx
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.service.app import create_app
from tests.adminsupport import AUTH, admin_settings
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path


async def test_an_open_circuit_shows_in_readyz_status_metrics_and_stats(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url:
        now = time.time()
        for _ in range(5):
            await app.state.store.circuit_failed("files", 5, 30.0, now)
        async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
            ready = await client.get("/readyz")
            metrics = (await client.get("/metrics")).text
            stats = (await client.get("/jobs/stats")).json()
        status = await asyncio.to_thread(CliRunner().invoke, main, ["status", "--url", url])
    assert ready.status_code == 200
    expected = {"state": "open", "failures": 5, "retry_at": round(now + 30.0, 3)}
    assert ready.json()["circuits"] == {"files": expected}
    assert stats["circuits"] == {"files": expected}
    assert 'jobhook_circuit_open{handler="files"} 1.0' in metrics
    assert 'jobhook_circuit_failures{handler="files"} 5.0' in metrics
    assert status.exit_code == 0, status.output
    # jobhook status's handlers table: the row of "files" says its circuit is open, 5 failures.
    row = next(line for line in status.output.splitlines() if " files " in line)
    assert [cell.strip() for cell in row.split("│")[1:-1]] == ["files", "open", "5"], row
