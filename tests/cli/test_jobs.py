"""``jobhook jobs|replay|track|wait`` through click's CliRunner, on a live server or a store.

CliRunner blocks, so each command runs in a thread while the server runs on the test's loop.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import structlog
from click.testing import CliRunner, Result

from receiver.cli.main import main
from receiver.models import Event, Progress, State
from receiver.ops.log import configure_logging
from receiver.service.app import create_app
from tests.adminsupport import AUTH, TOKEN, admin_settings, deliver
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from starlette.applications import Starlette


@pytest.fixture(autouse=True)
def logs_on_stderr() -> Iterator[None]:
    """The server's logs go to stderr, so the commands' stdout holds only their answers."""
    configure_logging("warning", "json")
    yield
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[Starlette, str]]:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url:
        yield app, url


async def cli(*args: str, url: str | None = None, token: str | None = TOKEN) -> Result:
    """Run ``jobhook ARGS`` in a thread (the token comes from JOBHOOK_ADMIN_TOKEN)."""
    env = {"JOBHOOK_ADMIN_TOKEN": token, "JOBHOOK_URL": url, "JOBHOOK_CONFIG": None}
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, main, list(args), env=env)


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def _post_some(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
        await deliver(client, "a", customer="acme")
        await deliver(client, "b", status="Failed", customer="zen")
        await deliver(client, "c", customer="acme")


async def test_ls_show_and_stats_against_the_service(service: tuple[Starlette, str]) -> None:
    _, url = service
    await _post_some(url)
    page = _json(await cli("jobs", "ls", "--json", "--metadata", "customer=acme", url=url))
    assert [job["job_id"] for job in page["jobs"]] == ["c", "a"]
    paged = _json(await cli("jobs", "ls", "--json", "--limit", "1", "--all", url=url))
    assert [job["job_id"] for job in paged["jobs"]] == ["c", "b", "a"]
    detail = _json(await cli("jobs", "show", "reducto", "b", "--json", url=url))
    assert (detail["job"]["state"], detail["deliveries"][0]["provider_status"]) == (
        "failed", "Failed")  # fmt: skip
    stats = _json(await cli("jobs", "stats", "--json", "--period", "7d", url=url))
    assert (stats["total"], stats["success_rate"]) == (3, pytest.approx(2 / 3, abs=1e-3))
    table = await cli("jobs", "ls", url=url)
    assert table.exit_code == 0
    assert all(name in table.stdout for name in ("succeeded", "failed", "reducto"))
    shown = await cli("jobs", "show", "reducto", "b", url=url)
    assert "failed" in shown.stdout
    assert "deliveries" in shown.stdout
    figures = await cli("jobs", "stats", url=url)
    assert "66.7%" in figures.stdout


async def test_ls_filters_by_error_code_and_stats_show_errors(
    service: tuple[Starlette, str],
) -> None:
    _, url = service
    await _post_some(url)
    page = _json(await cli("jobs", "ls", "--json", "--error-code", "provider_failed", url=url))
    assert [job["job_id"] for job in page["jobs"]] == ["b"]
    stats = _json(await cli("jobs", "stats", "--json", url=url))
    assert stats["errors"]["by_code"] == {"provider_failed": 1}
    figures = await cli("jobs", "stats", url=url)
    assert "errors by code" in figures.stdout
    assert "provider_failed" in figures.stdout


async def test_export_writes_csv_and_jsonl(service: tuple[Starlette, str], tmp_path: Path) -> None:
    _, url = service
    await _post_some(url)
    result = await cli("jobs", "export", "--format", "csv", "--state", "succeeded", url=url)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert sorted(r["job_id"] for r in rows) == ["a", "c"]
    out = tmp_path / "jobs.jsonl"
    result = await cli("jobs", "export", "--format", "jsonl", "-o", str(out), url=url)
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(line)["job_id"] for line in out.read_text().splitlines()) == [
        "a", "b", "c"]  # fmt: skip


async def test_read_only_commands_work_on_the_store_without_a_service(
    service: tuple[Starlette, str], tmp_path: Path
) -> None:
    _, url = service
    await _post_some(url)
    from_service = _json(await cli("jobs", "ls", "--json", url=url))
    config = str(tmp_path / "jobhook.toml")
    from_store = _json(await cli("jobs", "ls", "--json", "--config", config, token=None))
    assert from_store == from_service
    detail = _json(await cli("jobs", "show", "reducto", "a", "--json", "--config", config))
    assert detail["job"]["metadata"] == {"customer": "acme"}
    stats = _json(await cli("jobs", "stats", "--json", "--config", config))
    assert stats["by_state"] == {"failed": 1, "succeeded": 2}
    export = await cli("jobs", "export", "--format", "jsonl", "--config", config)
    assert len(export.stdout.splitlines()) == 3
    missing = await cli("jobs", "show", "reducto", "nope", "--config", config)
    assert missing.exit_code == 4
    bad = await cli("jobs", "ls", "--created-after", "soon", "--config", config)
    assert bad.exit_code == 2


async def test_track_then_replay(service: tuple[Starlette, str]) -> None:
    _, url = service
    tracked = await cli("track", "reducto", "job-7", "--metadata", "batch=42", "--pages", "9",
                        "--json", url=url)  # fmt: skip
    job = _json(tracked)["job"]
    assert (job["state"], job["metadata"], job["expected_pages"]) == ("queued", {"batch": "42"}, 9)
    async with httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "job-7")
    replayed = await cli("replay", "reducto", "job-7", "--include-succeeded", url=url)
    assert replayed.exit_code == 0, replayed.output
    assert "requeued" in replayed.stdout
    unknown = await cli("track", "nope", "job-7", url=url)
    assert unknown.exit_code == 4
    assert "no source named" in unknown.stderr


async def test_wait_exits_0_when_the_job_succeeds_while_waiting(
    service: tuple[Starlette, str],
) -> None:
    app, url = service
    await cli("track", "reducto", "job-1", url=url)
    await app.state.ingestor.ingest(Event("reducto", "job-1", State.RUNNING, "InProgress",
                                          "poll", progress=Progress(3, 10)))  # fmt: skip
    waiting = asyncio.create_task(cli("wait", "reducto", "job-1", "--timeout", "30", url=url))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    async with httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "job-1")
    result = await asyncio.wait_for(waiting, 10)
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.stdout
    assert "3/10" in result.stderr  # the progress bar of pages


async def test_wait_exits_1_for_a_failed_job_and_3_on_timeout(
    service: tuple[Starlette, str],
) -> None:
    _, url = service
    async with httpx.AsyncClient(base_url=url) as client:
        await deliver(client, "failed", status="Failed")
    failed = await cli("wait", "reducto", "failed", "--json", url=url)
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["job"]["state"] == "failed"
    await cli("track", "reducto", "slow", url=url)
    timed_out = await cli("wait", "reducto", "slow", "--timeout", "0.5", url=url)
    assert timed_out.exit_code == 3
    assert "timed out" in timed_out.stdout


async def test_a_wrong_token_is_refused_and_never_printed(service: tuple[Starlette, str]) -> None:
    _, url = service
    secret = "not-the-token-8f2e"
    result = await cli("jobs", "ls", url=url, token=secret)
    assert result.exit_code == 4
    assert "refused the token; pass one of the service's tokens (a secret of " in result.stderr
    assert "[[server.tokens]], or server.admin_token)" in result.stderr
    assert secret not in result.output


async def test_no_token_says_it_is_missing_and_how_to_give_it(
    service: tuple[Starlette, str],
) -> None:
    _, url = service
    result = await cli("jobs", "ls", url=url, token=None)
    assert result.exit_code == 4
    assert result.stderr.endswith(  # after the service's own log line, in this process
        "jobhook: no token given; pass --token or set JOBHOOK_ADMIN_TOKEN to one of the "
        "service's tokens (a secret of [[server.tokens]], or server.admin_token)\n"
    )


async def test_an_unreachable_service_says_how_to_reach_it_or_read_the_store() -> None:
    nothing = await cli("jobs", "ls", url="http://127.0.0.1:9")  # nobody listens there
    assert nothing.exit_code == 4
    assert nothing.stderr == (
        "jobhook: cannot reach http://127.0.0.1:9 (ConnectError); is `jobhook serve` running? "
        "Point --url (or JOBHOOK_URL) at it, or pass --config to read the store without a "
        "service\n"
    )
    replay = await cli("replay", "reducto", "job-1", url="http://127.0.0.1:9")
    assert replay.exit_code == 4
    assert "is `jobhook serve` running? Point --url (or JOBHOOK_URL) at it\n" in replay.stderr
    assert "--config" not in replay.stderr  # replay needs the service


@pytest.mark.parametrize(
    "command",
    [("jobs", "ls"), ("jobs", "export"), ("track", "reducto", "job-1"), ("replay",),
     ("jobs", "reprocess")],
)  # fmt: skip
async def test_metadata_without_a_key_or_equals_sign_exits_2_before_any_request(
    command: tuple[str, ...],
) -> None:
    """Every command's --metadata is read by the same parser; nothing listens on port 9."""
    for bad in ("batch", "=42"):
        result = await cli(*command, "--metadata", bad, url="http://127.0.0.1:9")
        assert result.exit_code == 2, result.output
        assert f"--metadata {bad!r} is not KEY=VALUE" in result.output
