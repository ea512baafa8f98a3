"""``jobhook simulate`` as a real process: serves the API, sends signed webhooks, hides secrets."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import httpx
from svix.webhooks import Webhook

from tests.sim.helpers import API_KEY, Recorder, wait_for
from tests.support import SECRET, free_port, live_server


async def _wait_up(url: str, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise AssertionError("jobhook simulate exited early")
            try:
                await client.get(f"{url}/_sim")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise AssertionError("jobhook simulate did not start")


async def test_simulate_command_serves_jobs_and_sends_verifiable_webhooks() -> None:
    recorder = Recorder()
    port = free_port()
    env = {**os.environ, "JOBHOOK_SIM_API_KEY": API_KEY, "JOBHOOK_SIM_SECRET": SECRET}
    async with live_server(recorder.app) as hook:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "receiver", "simulate", "--provider", "knowhere",
            "--port", str(port), "--webhook-url", f"{hook}/hook", "--jobs", "3",
            "--failed", "1", "--duration", "0.2",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            await _wait_up(base, process)
            async with httpx.AsyncClient(base_url=base) as client:
                listing = await client.get(
                    "/v1/jobs", headers={"Authorization": f"Bearer {API_KEY}"}
                )
            await wait_for(lambda: len(recorder.received) == 3)
        finally:
            process.send_signal(signal.SIGINT)
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=15)
    assert listing.status_code == 200
    assert len(listing.json()["jobs"]) == 3
    events = sorted(r.body.decode().split('"event":"')[1].split('"')[0] for r in recorder.received)
    assert events == ["job.completed", "job.completed", "job.failed"]
    for received in recorder.received:
        Webhook(SECRET).verify(received.body, received.headers)
    output = stdout + stderr
    assert b"sim_serving" in output
    assert SECRET.encode() not in output
    assert API_KEY.encode() not in output


async def test_simulate_command_refuses_to_start_without_an_api_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBHOOK_SIM_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "receiver", "simulate", "--port", str(free_port()),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=15)
    assert process.returncode == 2
    assert b"JOBHOOK_SIM_API_KEY" in stderr


async def test_reducto_sdk_run_job_against_simulate_result_url_gets_a_fetchable_url() -> None:
    from reducto import AsyncReducto

    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "receiver", "simulate", "--port", str(port), "--result", "url",
        "--result-bytes", "4096", "--url-ttl", "60", "--duration", "0.2",
        "--fail-rate", "0", "--error-code", "DOCUMENT_CORRUPT",
        env={**os.environ, "JOBHOOK_SIM_API_KEY": API_KEY},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_up(base, process)
        # The SDK's job model lists fewer status words than its API sends while a job runs
        # (InProgress): poll loosely, then read the finished job strictly.
        async with AsyncReducto(api_key=API_KEY, base_url=base, max_retries=0,
                                _strict_response_validation=False) as loose:  # fmt: skip
            submitted = await loose.parse.run_job(input="https://example.com/big.pdf")
            while (await loose.job.get(submitted.job_id)).status != "Completed":
                await asyncio.sleep(0.1)
        async with AsyncReducto(api_key=API_KEY, base_url=base, max_retries=0,
                                _strict_response_validation=True) as client:  # fmt: skip
            job = await client.job.get(submitted.job_id)
        assert job.result is not None
        result = job.result.result
        assert result.type == "url"
        async with httpx.AsyncClient() as fetcher:
            fetched = await fetcher.get(result.url)
    finally:
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), timeout=15)
    assert fetched.status_code == 200
    assert len(fetched.content) == 4096
    assert isinstance(fetched.json(), dict)
