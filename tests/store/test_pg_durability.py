"""Whether PostgreSQL's commits are as durable as a 2xx promises: the startup finding, the
``/readyz`` detail, the refusal behind ``store.require_synchronous_replication``, and the
multi-host URLs a failover needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.errors import ConfigError, StoreUnavailableError
from receiver.service.app import create_app
from receiver.service.preflight import store_problems
from receiver.store.postgres.durability import assess
from receiver.store.postgres.store import PostgresStore
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from pathlib import Path


def test_synchronous_standbys_that_flush_put_nothing_at_risk() -> None:
    for commit in ("on", "remote_apply"):
        found = assess(commit, "*", "on", standbys=1)
        assert (found.mode, found.risk) == ("synchronous", None)


def test_asynchronous_standbys_put_acknowledged_commits_at_risk() -> None:
    found = assess("on", "", "on", standbys=2)
    assert found.mode == "asynchronous"
    assert "failover can lose acknowledged commits" in (found.risk or "")


def test_synchronous_commit_local_makes_named_standbys_asynchronous() -> None:
    assert assess("local", "*", "on", standbys=1).mode == "asynchronous"


def test_remote_write_is_flagged_as_memory_only_on_the_standby() -> None:
    assert "only in memory" in (assess("remote_write", "*", "on", standbys=1).risk or "")


def test_a_single_server_with_fsync_is_safe_and_without_it_is_not() -> None:
    assert (assess("on", "", "on", standbys=0).mode, assess("on", "", "on", 0).risk) == (
        "single",
        None,
    )
    assert "fsync is off" in (assess("on", "", "off", standbys=0).risk or "")
    assert "synchronous_commit is off" in (assess("off", "", "on", standbys=0).risk or "")


def test_a_hidden_replication_view_is_unknown_not_safe_or_at_risk() -> None:
    found = assess("on", "", "on", standbys=None)
    assert (found.mode, found.risk) == ("unknown", None)


@pytest.mark.postgres
async def test_a_single_server_is_reported_in_readyz(postgres_url: str, tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[store]\nurl = "{postgres_url}"\n'
        f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n'
    )
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        body = (await client.get("/readyz")).json()
    assert body["store"]["durability"]["mode"] == "single"
    assert body["store"]["durability"]["risk"] is None


@pytest.mark.postgres
async def test_requiring_synchronous_replication_refuses_a_single_server(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url, require_synchronous_replication=True)
    with pytest.raises(ConfigError, match=r"store\.require_synchronous_replication"):
        await store.open()
    with pytest.raises(StoreUnavailableError, match="not open"):  # no pool left behind
        await store.ping()


def _settings(tmp_path: Path, url: str) -> object:
    config = tmp_path / "jobhook.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[store]\nurl = "{url}"\n')
    return load_settings(config, environ={})


def test_a_multi_host_url_with_read_write_sessions_is_accepted(tmp_path: Path) -> None:
    url = "postgresql://jh:pw@db1:5432,db2:5433/jobhook?target_session_attrs=read-write"
    settings = _settings(tmp_path, url)
    assert store_problems(settings) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://jh:pw@db1,db2/jobhook", "needs ?target_session_attrs=read-write"),
        ("postgresql://jh@db1:5432,db2:70000/jobhook?target_session_attrs=read-write",
         "is not host, host:port"),
        ("postgresql://jh@db1/jobhook?target_session_attrs=read-only", "must be read-write"),
        ("postgresql://jh@db1/jobhook?target_session_attrs=nearest", "must be one of"),
    ],
)  # fmt: skip
def test_a_url_jobhook_cannot_write_through_is_a_config_error(
    tmp_path: Path, url: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(tmp_path, url)
    assert problem in str(caught.value)
    assert "store.url" in str(caught.value)
    assert "pw" not in str(caught.value)
