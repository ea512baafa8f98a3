"""The client on least privilege: a track token registers and waits, is refused replay with
``Forbidden`` naming the role, and an admin token reads the audit trail, both clients alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from receiver.client import Forbidden
from receiver.config.load import load_settings
from receiver.service.app import create_app
from tests.adminsupport import SECRETS, token_config
from tests.client.helpers import Both
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    app = create_app(load_settings(token_config(tmp_path), environ={}))
    async with live_server(app) as served:
        yield served


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_track_token_tracks_and_an_admin_token_reads_the_trail(url: str, kind: str) -> None:
    pipeline = Both(kind, url, SECRETS["pipeline"])
    boss = Both(kind, url, SECRETS["boss"])
    try:
        await pipeline.track("reducto", "j1")
        await pipeline.track("reducto", "j2")
        with pytest.raises(Forbidden) as refused:
            await pipeline.replay("reducto", "j1")
        assert refused.value.needs == "operate"
        with pytest.raises(Forbidden):
            await pipeline.audit()
        entries = await boss.audit(token="pipeline", page_size=1)
    finally:
        await pipeline.close()
        await boss.close()
    assert [(e.action, e.target, e.outcome, e.role) for e in entries] == [
        ("list_audit", "/audit", "forbidden", "track"),
        ("replay_job", "/jobs/reducto/j1/replay", "forbidden", "track"),
        ("track_job", "reducto/j2", "ok", "track"),
        ("track_job", "reducto/j1", "ok", "track"),
    ]
