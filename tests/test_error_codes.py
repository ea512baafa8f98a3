"""Provider error codes end to end: simulator → webhook or poll → store → jobs API and CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from click.testing import CliRunner

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.models import Event, State
from receiver.ops.quality import JOBHOOK_CODES
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from receiver.config.settings import Settings

REPO = Path(__file__).resolve().parent.parent
API_KEY = "sim-key-123"
TOKEN = "admin-token-e770c0de42"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _settings(tmp_path: Path, provider: str, sim_url: str) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
[sources.{provider}]
provider = "{provider}"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.{provider}.poll]
grace_seconds = 0.0
initial_delay = 0.1
max_delay = 0.3
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def _error_code(client: httpx.AsyncClient, path: str) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            response = await client.get(path)
            if response.status_code == 200 and response.json()["job"]["error_code"]:
                job: dict[str, Any] = response.json()["job"]
                return job
            await asyncio.sleep(0.05)


@pytest.mark.timeout(60)
async def test_reducto_code_comes_from_the_confirming_job_api_call(tmp_path: Path) -> None:
    # Reducto's webhook says only "Failed"; the job API's error object carries the code.
    port = free_port()
    sim = Simulator("reducto", api_key=API_KEY, duration=0.2, secret=SECRET,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/reducto")  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "reducto", sim_url))
        async with (
            live_server(app, port=port) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as client,
        ):
            (job_id,) = sim.create_jobs(1, outcome="failed", error_code="TIMEOUT")
            job = await _error_code(client, f"/jobs/reducto/{job_id}")
            shown = await asyncio.to_thread(
                CliRunner().invoke,
                main,
                ["jobs", "show", "reducto", job_id],
                env={"JOBHOOK_ADMIN_TOKEN": TOKEN, "JOBHOOK_URL": url, "JOBHOOK_CONFIG": None},
            )
    assert (job["state"], job["error_code"]) == ("failed", "TIMEOUT")
    assert shown.exit_code == 0, shown.output
    assert "error code" in shown.stdout
    assert "TIMEOUT" in shown.stdout


@pytest.mark.timeout(60)
async def test_knowhere_code_comes_with_the_poll_and_keeps_the_request_id(
    tmp_path: Path,
) -> None:
    sim = Simulator("knowhere", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, "knowhere", sim_url))
        async with (
            live_server(app) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as client,
        ):
            (job_id,) = sim.create_jobs(1, outcome="failed", error_code="DEADLINE_EXCEEDED")
            await app.state.ingestor.ingest(
                Event(source="knowhere", job_id=job_id, state=State.QUEUED,
                      provider_status="tracked", via="track")
            )  # fmt: skip
            job = await _error_code(client, f"/jobs/knowhere/{job_id}")
    assert job["error_code"] == "DEADLINE_EXCEEDED"
    assert job["error"] == "DEADLINE_EXCEEDED: Parsing did not finish in time (request req_0)"


def test_a_code_the_provider_does_not_document_is_refused() -> None:
    sim = Simulator("reducto", api_key=API_KEY)
    with pytest.raises(ValueError, match="reducto error codes are"):
        sim.create_jobs(1, outcome="failed", error_code="NOT_A_CODE")


def test_jobhook_codes_of_a_result_that_cannot_be_had_are_labelled_and_documented() -> None:
    table = (REPO / "docs" / "admin-api.md").read_text(encoding="utf-8")
    for code in ("result_expired", "result_consumed"):
        assert code in JOBHOOK_CODES
        assert f"`{code}`" in table
