"""``jobhook demo --console`` has what the console's user is told to try, on real loopback:
several error codes in the stats, a dead delivery that a replay delivers once the downstream
service is back, a processing_timeout DocExtract job whose reprocess succeeds with
``reprocessed_from``, and a weak field found by the API."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import httpx
import pytest
from rich.console import Console

from receiver.cli.demo_console import HANDLER, console_demo, guide
from tests.cli.test_jobs import cli, logs_on_stderr  # noqa: F401 (autouse: logs off stdout)

WANTED = {"DOCUMENT_CORRUPT", "processing_timeout", "extraction_failed", "http_5xx"}


async def until(what: str, check: Any, seconds: float = 25.0) -> Any:
    """Poll ``check()`` (a coroutine function) until it answers something truthy."""
    try:
        async with asyncio.timeout(seconds):
            while not (found := await check()):
                await asyncio.sleep(0.2)
            return found
    except TimeoutError:
        raise AssertionError(f"the demo never got to: {what}") from None


async def get(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.timeout(60)
async def test_the_console_demo_shows_failures_dead_letters_reprocess_and_weak_fields() -> None:
    async with console_demo(jobs=8, drop=0.3, down_seconds=60.0) as demo:
        auth = {"Authorization": f"Bearer {demo.token}"}
        async with httpx.AsyncClient(base_url=demo.url, headers=auth, timeout=30) as client:

            async def codes() -> set[str] | None:
                by_code = (await get(client, "/jobs/stats"))["errors"]["by_code"]
                return set(by_code) if set(by_code) >= WANTED else None

            await until("errors of four codes in the stats", codes)
            shown = await cli("jobs", "stats", url=demo.url, token=demo.token)
            assert shown.exit_code == 0, shown.output
            assert all(code in shown.stdout for code in WANTED), shown.stdout

            async def dead() -> Any:
                return await demo.app.state.store.dead_list(HANDLER, None, 10)

            first = (await until("a dead delivery", dead))[0]
            assert first.error_code == "http_5xx"
            async with httpx.AsyncClient(base_url=demo.ui_url) as browser:
                login = await browser.post("login", data={"token": demo.token})
                assert login.status_code == 303
                page = (await browser.get("dead")).text
            assert HANDLER in page
            assert "http_5xx" in page
            assert first.job_id in page
            assert demo.destination.refused >= 2
            assert not demo.destination.up
            demo.destination.recover()
            replay = await client.post(f"/jobs/{first.source}/{first.job_id}/replay")
            assert replay.status_code == 200, replay.text
            assert replay.json()["requeued"] >= 1

            async def delivered() -> bool:
                detail = await get(client, f"/jobs/{first.source}/{first.job_id}")
                return any(d["handler"] == HANDLER and d["state"] == "succeeded"
                           for d in detail["dispatches"])  # fmt: skip

            await until("the replayed delivery delivered", delivered)
            assert demo.destination.accepted >= 1

            async def timed_out() -> Any:
                return (await get(client, "/jobs", source="docextract", state="failed",
                                  error_code="processing_timeout"))["jobs"]  # fmt: skip

            old = (await until("a failed processing_timeout job", timed_out))[0]["job_id"]
            redo = await client.post(f"/jobs/docextract/{old}/reprocess")
            assert redo.status_code == 200, redo.text
            new = redo.json()["new_job_id"]

            async def reprocessed() -> Any:
                job = (await get(client, f"/jobs/docextract/{new}"))["job"]
                return job if job["state"] == "succeeded" else None

            job = await until("the reprocessed job succeeded", reprocessed)
            assert job["reprocessed_from"]["job_id"] == old

            weak = (await get(client, "/jobs", field="total", max_confidence="0.8"))["jobs"]
            assert weak
            assert {j["source"] for j in weak} == {"docextract"}


async def test_the_guide_names_the_console_the_token_and_what_to_try() -> None:
    async with console_demo(jobs=2, drop=0.0, down_seconds=5.0) as demo:
        out = io.StringIO()
        Console(file=out, width=200).print(guide(demo, 5.0))
        text = out.getvalue()
        async with httpx.AsyncClient(base_url=demo.ui_url) as client:
            login = await client.get("login")
    assert demo.ui_url in text
    assert demo.token in text
    assert f"JOBHOOK_URL={demo.url} JOBHOOK_ADMIN_TOKEN={demo.token} uv run jobhook jobs stats" in (
        text
    )
    for step in ("Dead letters", "processing_timeout", "Reprocess", "failed job"):
        assert step in text
    assert login.status_code == 200
