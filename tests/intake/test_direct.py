"""Reducto's direct webhooks: a secret path token, the body only a hint, the job API the truth."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from reducto import AsyncReducto

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "sim-key-123"
TOKEN, OLD_TOKEN = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
ADMIN = "admin-token-d1rec7"


def _config(tmp_path: Path, sim_url: str, extra: str = "", tokens: str = "") -> str:
    tokens = tokens or f'"{TOKEN}", "{OLD_TOKEN}"'
    return f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{ADMIN}"
[results]
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.reducto]
provider = "reducto"
webhook_mode = "direct"
direct_tokens = [{tokens}]
direct_unknown_per_minute = 3
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
{extra}
[sources.reducto.poll]
enabled = false
requests_per_minute = 600
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
"""


def _settings(tmp_path: Path, sim_url: str, **kw: str) -> Settings:
    path = tmp_path / "jobhook.toml"
    path.write_text(_config(tmp_path, sim_url, **kw), encoding="utf-8")
    return load_settings(path, environ={})


@pytest.fixture(autouse=True)
def quiet_url_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The URLs holding the token are logged by httpx and uvicorn's access log (jobhook serve
    and simulate quiet both) and by the Reducto SDK's request log (at DEBUG); the suite's secret
    scan would see them when the test run logs at those levels."""
    for name in ("httpx", "reducto", "uvicorn.access"):
        caplog.set_level(logging.WARNING, logger=name)


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[tuple[Simulator, str, Any]]:
    sim = Simulator("reducto", api_key=API_KEY, duration=60.0)
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, sim_url))
        async with live_server(app) as url:
            yield sim, url, app


def _gets(sim: Simulator, job_id: str) -> int:
    return sum(1 for e in sim.log if e.path == f"/job/{job_id}")


async def _hint(url: str, job_id: str, token: str = TOKEN, status: str = "Completed") -> int:
    body = {"status": status, "job_id": job_id, "metadata": {"forged": True}}
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{url}/webhooks/reducto/{token}", json=body)
    return response.status_code


async def _track(url: str, job_id: str) -> None:
    """What a pipeline does right after submitting: register the job."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        response = await client.post(f"{url}/jobs", json={"source": "reducto", "job_id": job_id})
    assert response.status_code in (200, 201), response.text


async def _job(url: str, job_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        response = await client.get(f"{url}/jobs/reducto/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()["job"]
    return job


async def _until(check: Any, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.02)


@pytest.mark.timeout(60)
async def test_a_direct_webhook_sends_jobhook_to_the_job_api_and_the_job_completes(
    tmp_path: Path,
) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.3)
    async with live_server(build_app(sim)) as sim_url:
        app = create_app(_settings(tmp_path, sim_url))
        async with live_server(app) as url, AsyncReducto(api_key=API_KEY, base_url=sim_url) as rc:
            hook = {"mode": "direct", "url": f"{url}/webhooks/reducto/{TOKEN}"}
            asked = {"webhook": hook, "metadata": {"order": 7}}
            job = await rc.parse.run_job(input="https://example.com/a.pdf", async_=asked)
            done = tmp_path / "out" / "reducto" / f"{job.job_id}.json"
            await _until(done.exists, 20)
    completion = json.loads(done.read_text())
    assert completion["state"] == "succeeded"
    assert {d.state for d in sim.deliveries} == {"delivered"}
    assert all(a.status_code == 202 for d in sim.deliveries for a in d.attempts)


@pytest.mark.timeout(30)
async def test_every_configured_token_is_accepted_and_any_other_is_404(
    both: tuple[Simulator, str, Any],
) -> None:
    sim, url, _ = both
    (job_id,) = sim.create_jobs(1)
    assert await _hint(url, job_id, TOKEN) == 202
    assert await _hint(url, job_id, OLD_TOKEN) in (202,)  # rotation: the old one still works
    assert await _hint(url, job_id, TOKEN[:-1] + ("A" if TOKEN[-1] != "A" else "B")) == 404
    assert await _hint(url, job_id, "x") == 404


@pytest.mark.timeout(30)
async def test_a_forged_completed_for_a_pending_job_changes_nothing(
    both: tuple[Simulator, str, Any], tmp_path: Path
) -> None:
    sim, url, _ = both
    (job_id,) = sim.create_jobs(1)  # 60 s long: Pending, then InProgress
    await _track(url, job_id)
    assert await _hint(url, job_id, status="Completed") == 202
    await _until(lambda: _gets(sim, job_id) >= 1)
    await asyncio.sleep(0.2)
    job = await _job(url, job_id)
    assert job["state"] in ("queued", "running")
    assert job["provider_status"] in ("Pending", "InProgress")
    assert "forged" not in job["metadata"]
    assert not (tmp_path / "out" / "reducto").exists()


@pytest.mark.timeout(30)
async def test_duplicate_hints_collapse_into_few_job_api_calls(
    both: tuple[Simulator, str, Any],
) -> None:
    sim, url, _ = both
    (job_id,) = sim.create_jobs(1)
    await _track(url, job_id)
    codes = await asyncio.gather(*(_hint(url, job_id) for _ in range(20)))
    assert set(codes) == {202}
    await _until(lambda: _gets(sim, job_id) >= 1)
    await asyncio.sleep(0.3)
    assert _gets(sim, job_id) <= 3


@pytest.mark.timeout(30)
async def test_hints_for_untracked_jobs_are_rationed_per_minute(
    both: tuple[Simulator, str, Any],
) -> None:
    sim, url, _ = both
    codes = [await _hint(url, f"made-up-{n}") for n in range(10)]
    assert codes.count(202) == 3  # direct_unknown_per_minute
    assert codes.count(429) == 7
    await _until(lambda: len([e for e in sim.log if e.path.startswith("/job/made-up-")]) >= 3)
    await asyncio.sleep(0.3)
    looked_up = [e for e in sim.log if e.path.startswith("/job/made-up-")]
    assert len(looked_up) == 3
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        listed = (await client.get(f"{url}/jobs")).json()["jobs"]
    assert listed == []  # the provider does not know them: nothing became state


@pytest.mark.timeout(30)
async def test_a_body_without_a_job_id_is_400(both: tuple[Simulator, str, Any]) -> None:
    _, url, _ = both
    async with httpx.AsyncClient() as client:
        bad = await client.post(f"{url}/webhooks/reducto/{TOKEN}", content=b'{"status": "x"}')
        signed = await client.post(f"{url}/webhooks/reducto", content=b"{}")
    assert bad.status_code == 400
    assert signed.status_code in (400, 401)  # the signed route has nothing to verify with


@pytest.mark.parametrize(
    ("tokens", "extra", "message"),
    [('"short"', "", "direct_tokens #1"),
     (f'"{"a" * 31}"', "", "direct_tokens #1"),
     (f'"{TOKEN}!"', "", "direct_tokens #1")],
    ids=["short", "31-chars", "not-url-safe"],
)  # fmt: skip
def test_tokens_must_hold_128_bits(tmp_path: Path, tokens: str, extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(tmp_path, "http://127.0.0.1:1", tokens=tokens, extra=extra)


def test_direct_mode_is_for_reducto_with_a_job_api(tmp_path: Path) -> None:
    text = _config(tmp_path, "http://127.0.0.1:1").replace('provider = "reducto"',
                                                          'provider = "knowhere"')  # fmt: skip
    path = tmp_path / "k.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="for provider 'reducto'"):
        load_settings(path, environ={})
