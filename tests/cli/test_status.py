"""``jobhook status`` and ``/readyz``'s detail: each source's confirmations, budget and ETA."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import httpx
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings


def _settings(tmp_path: Path, rpm: str = "") -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "http://127.0.0.1:9"
api_key = "key"
[sources.knowhere]
provider = "knowhere"
secrets = ["{SECRET}"]
api_base_url = "http://127.0.0.1:9"
api_key = "key"
{rpm}
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def test_readyz_and_status_show_each_sources_budget_and_drain_time(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path, "[sources.knowhere.poll]\nrequests_per_minute = 30"))
    async with live_server(app) as url:
        async with httpx.AsyncClient() as client:
            body = (await client.get(f"{url}/readyz")).json()
        result = await asyncio.to_thread(CliRunner().invoke, main, ["status", "--url", url])
        as_json = await asyncio.to_thread(
            CliRunner().invoke, main, ["status", "--url", url, "--json"]
        )
    assert body["status"] == "ready"
    assert body["confirmations"] == {
        "knowhere": {"confirmations": 0, "budget_per_minute": 30, "eta_seconds": 0, "slow": False},
        "reducto": {"confirmations": 0, "budget_per_minute": 300, "eta_seconds": 0, "slow": False},
    }
    assert result.exit_code == 0, result.output
    assert "reducto: 0 confirmations waiting, 300/min, drains in 0 s [ok]" in result.output
    assert "knowhere: 0 confirmations waiting, 30/min" in result.output
    assert json.loads(as_json.output) == body


def test_status_of_a_service_that_is_not_there_exits_4() -> None:
    result = CliRunner().invoke(main, ["status", "--url", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 4
    assert "cannot read" in result.output
