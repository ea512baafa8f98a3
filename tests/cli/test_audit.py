"""``jobhook audit ls`` and the job commands on least privilege, through click's CliRunner on a
live server with four named tokens (a thread per command: the server runs on the test's loop)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

import pytest
import structlog
from click.testing import CliRunner, Result

from receiver.cli.main import main
from receiver.config.load import load_settings
from receiver.ops.log import configure_logging
from receiver.service.app import create_app
from tests.adminsupport import SECRETS, token_config
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path


@pytest.fixture(autouse=True)
def logs_on_stderr() -> Iterator[None]:
    """The server's logs go to stderr, so the commands' stdout holds only their answers."""
    configure_logging("warning", "json")
    yield
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    app = create_app(load_settings(token_config(tmp_path), environ={}))
    async with live_server(app) as served:
        yield served


async def cli(url: str, name: str, *args: str) -> Result:
    env = {"JOBHOOK_ADMIN_TOKEN": SECRETS[name], "JOBHOOK_URL": url, "JOBHOOK_CONFIG": None}
    return await asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


async def test_audit_ls_shows_who_did_what_and_what_was_refused(url: str) -> None:
    assert (await cli(url, "pipeline", "track", "reducto", "job-7")).exit_code == 0
    refused = await cli(url, "pipeline", "replay", "reducto", "job-7")
    viewer = await cli(url, "viewer", "audit", "ls")
    table = await cli(url, "boss", "audit", "ls")
    found = await cli(url, "boss", "audit", "ls", "--name", "pipeline", "--json")
    assert refused.exit_code == 4
    assert "use a token whose role is operate or above" in refused.stderr
    assert viewer.exit_code == 4
    assert "'admin' role" in viewer.stderr
    assert table.exit_code == 0, table.output
    assert "pipeline" in table.stdout
    assert "track_job" in table.stdout
    entries = json.loads(found.stdout)["entries"]
    assert [(e["action"], e["outcome"]) for e in entries] == [
        ("replay_job", "forbidden"),
        ("track_job", "ok"),
    ]
    assert all(secret not in table.output + found.output for secret in SECRETS.values())
