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


TOKEN = "status-test-admin-token"


def _settings(tmp_path: Path, rpm: str = "") -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
[[handlers]]
name = "archive"
type = "file"
dir = "{tmp_path / "out"}"
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
    assert f"{url}: ready" in result.output
    assert _row(result.output, "reducto") == ["reducto", "300/min", "0", "0 s"]
    assert _row(result.output, "knowhere") == ["knowhere", "30/min", "0", "0 s"]
    assert "backlog and store: pass --token (or set JOBHOOK_ADMIN_TOKEN)" in result.output
    assert json.loads(as_json.output) == body


def _row(output: str, first: str) -> list[str]:
    """The cells of the table row that starts with ``first`` (rich's box lines split them)."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if cells[0] == first:
            return [cell for cell in cells if cell]
    raise AssertionError(f"no row {first!r} in:\n{output}")


async def test_status_with_the_admin_token_adds_the_backlog_and_the_store(
    tmp_path: Path,
) -> None:
    app = create_app(_settings(tmp_path))
    async with live_server(app) as url:
        env = {"JOBHOOK_URL": url, "JOBHOOK_ADMIN_TOKEN": TOKEN}
        result = await asyncio.to_thread(CliRunner().invoke, main, ["status"], env=env)
        as_json = await asyncio.to_thread(CliRunner().invoke, main, ["status", "--json"], env=env)
        wrong = await asyncio.to_thread(
            CliRunner().invoke, main, ["status", "--url", url, "--token", "wrong"]
        )
    assert result.exit_code == 0, result.output
    assert f"{url}: ready, store sqlite" in result.output
    assert _row(result.output, "reducto") == ["reducto", "reducto", "300/min", "0", "0 s"]
    assert _row(result.output, "archive") == ["archive", "file", "closed", "0"]
    assert _row(result.output, "0") == ["0", "0", "0", "0"]  # resolving, pending, running, dead
    body = json.loads(as_json.output)
    assert body["store"] == {"backend": "sqlite"}
    assert body["handlers"] == {
        "archive": {"type": "file", "state": "closed", "failures": 0, "retry_at": None}
    }
    assert body["backlog"]["deliveries_dead"] == 0
    assert TOKEN not in result.output + as_json.output
    assert wrong.exit_code == 0, "ready all the same"
    assert _row(wrong.output, "reducto") == ["reducto", "300/min", "0", "0 s"]
    assert "backlog and store unknown: the service refused the token" in wrong.output


def test_status_of_a_service_that_is_not_there_exits_4() -> None:
    result = CliRunner().invoke(main, ["status", "--url", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 4
    assert "cannot read" in result.output
