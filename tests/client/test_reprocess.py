"""``reprocess`` against a real jobhook whose DocExtract source is the simulator: a failed job is
submitted again; a provider that keeps answering 5xx is ServiceUnavailable (the API's 502)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from receiver.client import AsyncClient as Client
from receiver.client import NotFound, ServiceUnavailable
from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from receiver.sim.limits import Fault
from tests.adminsupport import TOKEN
from tests.client.helpers import Both
from tests.support import SECRET, free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.applications import Starlette

API_KEY = "sim-key-client-reprocess"


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[Simulator, Starlette, str]]:
    port = free_port()
    sim = Simulator("docextract", api_key=API_KEY, secret=SECRET, duration=0.2,
                    requests_per_minute=6000,
                    webhook_url=f"http://127.0.0.1:{port}/webhooks/docextract")  # fmt: skip
    async with live_server(build_app(sim)) as sim_url:
        config = tmp_path / "jobhook.toml"
        config.write_text(f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
[sources.docextract]
provider = "docextract"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.docextract.poll]
requests_per_minute = 600
""", encoding="utf-8")  # fmt: skip
        app = create_app(load_settings(config, environ={}))
        async with live_server(app, port=port) as url:
            yield sim, app, url


async def _failed_job(sim: Simulator, url: str) -> str:
    """A job the simulator fails, once jobhook has its webhook and has confirmed it."""
    (job_id,) = sim.create_jobs(outcome="failed", error_code="processing_timeout")
    async with Client(url, TOKEN) as client, asyncio.timeout(20):
        while True:
            try:
                if (await client.get("docextract", job_id)).job.error_code:
                    return job_id
            except NotFound:
                pass
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_reprocess_submits_a_failed_job_again_once(
    stack: tuple[Simulator, Starlette, str], kind: str
) -> None:
    sim, _, url = stack
    job_id = await _failed_job(sim, url)
    both = Both(kind, url)
    try:
        outcome = await both.reprocess("docextract", job_id)
        assert (outcome.source, outcome.job_id, outcome.status) == ("docextract", job_id,
                                                                    "submitted")  # fmt: skip
        assert outcome.new_job_id is not None
        again = await both.reprocess("docextract", job_id)
        assert (again.status, again.new_job_id) == ("already_reprocessed", outcome.new_job_id)
        linked = await both.get("docextract", job_id)
        assert linked.job.reprocessed_as is not None
        assert linked.job.reprocessed_as.job_id == outcome.new_job_id
    finally:
        await both.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_provider_answering_5xx_is_service_unavailable(
    stack: tuple[Simulator, Starlette, str], kind: str
) -> None:
    sim, _, url = stack
    job_id = await _failed_job(sim, url)
    sim.faults.add(Fault(count=100, status=503, retry_after=0))
    both = Both(kind, url)
    try:
        with pytest.raises(ServiceUnavailable) as caught:
            await both.reprocess("docextract", job_id)
    finally:
        await both.close()
    assert (caught.value.status, caught.value.code) == (502, "provider_error")
    assert "nothing was lost: call again to retry" in caught.value.message
