"""A results disk that fills mid-download: the partial file removed, the completion retried with
code ``disk_full`` (metric and alert), webhooks still acknowledged (the store lives on another
filesystem), and delivery once space returns."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from tests.reliability.mounts import remount, tmpfs
from tests.support import SECRET, live_server, reducto_body, signed_headers

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings

API_KEY = "sim-disk-key-0042"
GIB = 1024**3
MIB = 1024**2


def _settings(tmp_path: Path, sim_url: str, results: Path) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[results]
dir = "{results}"
max_bytes = {2 * GIB}
allowed_hosts = ["127.0.0.1"]
allow_http = true
allow_private_networks = true
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
api_base_url = "{sim_url}"
api_key = "{API_KEY}"
[sources.reducto.poll]
grace_seconds = 3600
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
backoff_initial = 0.05
""",
        encoding="utf-8",
    )
    return load_settings(config, environ={})


async def _webhook(client: httpx.AsyncClient, job_id: str) -> int:
    body = reducto_body(job_id)
    response = await client.post(
        "/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=f"msg_{job_id}")
    )
    return response.status_code


def _completion_error(settings: Settings, job_id: str) -> tuple[str, str | None]:
    with sqlite3.connect(settings.store.url.removeprefix("sqlite:///")) as db:
        row = db.execute(
            "SELECT phase, last_error FROM completions WHERE job_id = ?", (job_id,)
        ).fetchone()
    return (row[0], row[1]) if row is not None else ("none", None)


def _parts(directory: Path) -> list[str]:
    return [p.name for p in directory.rglob("*") if p.is_file() and p.name.endswith(".part")]


@pytest.mark.timeout(90)
async def test_a_full_results_disk_is_retried_as_disk_full_and_delivered_once_space_returns(
    tmp_path: Path,
) -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    with tmpfs(tmp_path / "results", "8m") as results:
        free = os.statvfs(results).f_bavail
        async with live_server(build_app(sim)) as sim_url:
            settings = _settings(tmp_path, sim_url, results)
            app = create_app(settings)
            async with (
                live_server(app) as url,
                httpx.AsyncClient(base_url=url, timeout=10) as client,
            ):
                fetcher = app.state.runtime.fetcher
                # A 1 GiB result on an 8 MiB disk: it fills mid-download.
                (huge,) = sim.create_jobs(1, result="url", result_bytes=GIB)
                assert await _webhook(client, huge) == 200
                async with asyncio.timeout(30):
                    while fetcher.failures["disk_full"] < 1:
                        await asyncio.sleep(0.02)
                # Its next try is a second away at least: the partial file is gone by now.
                parts, freed = _parts(results), os.statvfs(results).f_bavail
                # A 24 MiB one: waits for space too, while webhooks keep being acknowledged.
                (fits,) = sim.create_jobs(1, result="url", result_bytes=24 * MIB)
                assert await _webhook(client, fits) == 200
                async with asyncio.timeout(30):
                    while fetcher.failures["disk_full"] < 2:
                        await asyncio.sleep(0.02)
                statuses = [await _webhook(client, f"plain-{n}") for n in range(5)]
                phase, error = _completion_error(settings, fits)
                metrics = (await client.get("/metrics")).text
                # Space returns: the 24 MiB result is fetched and delivered on a later retry.
                assert remount(results, "size=64m").returncode == 0
                out = tmp_path / "out" / "reducto"
                async with asyncio.timeout(40):
                    while not (out / f"{fits}.json").exists():
                        await asyncio.sleep(0.05)
                huge_phase, huge_error = _completion_error(settings, huge)

    assert statuses == [200] * 5, "webhooks must be acknowledged while the results disk is full"
    assert phase == "resolving", "a full disk must not give the completion up"
    assert error is not None
    assert "No space left" in error
    assert 'jobhook_result_fetch_failures_total{code="disk_full"}' in metrics
    document = json.loads((out / f"{fits}.json").read_text())
    assert document["result"]["bytes"] == 24 * MIB
    assert (out / f"{fits}.result").stat().st_size == 24 * MIB
    # The 1 GiB result still cannot fit: it keeps waiting.
    assert huge_phase == "resolving"
    assert huge_error is not None
    assert "No space left" in huge_error
    assert parts == [], "the partial download must be removed"
    assert freed >= free - 2, f"{free - freed} blocks still used after the failed download"
