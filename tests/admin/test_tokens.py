"""Named, scoped tokens over a real server, on SQLite and PostgreSQL: each role's reach, 403
naming the role needed, and one audit row per action and per refusal, read by an admin."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.config.load import load_settings
from receiver.service.app import create_app
from receiver.service.reload import Reloader
from tests.adminsupport import SECRETS, TOKEN, deliver, inject_fault, token_config
from tests.services import postgres_database
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@contextlib.asynccontextmanager
async def _store_url(kind: str) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield ""
        return
    async with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    async with _store_url(request.param) as store:
        app = create_app(load_settings(token_config(tmp_path, store=store), environ={}))
        async with live_server(app) as served:
            yield served


def _as(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[name]}"}


async def _call(c: httpx.AsyncClient, name: str, method: str, path: str, **kw: Any) -> Any:
    return await c.request(method, path, headers=_as(name), **kw)


async def test_each_role_reaches_what_it_may_and_each_call_is_audited(url: str) -> None:
    track = {"json": {"source": "reducto", "job_id": "job-1"}}
    async with httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "done-1")
        assert (await _call(c, "viewer", "GET", "/jobs")).status_code == 200
        assert (
            await _call(c, "viewer", "GET", "/jobs/reducto/done-1/wait?timeout=0")
        ).status_code == 200
        refused = {
            "track": await _call(c, "viewer", "POST", "/jobs", **track),
            "operate": await _call(c, "viewer", "POST", "/jobs/reducto/done-1/replay"),
            "admin": await _call(c, "viewer", "POST", "/jobs/reducto/done-1/reprocess"),
        }
        for needed, response in refused.items():
            assert response.status_code == 403, response.text
            assert response.json()["needs"] == needed
            assert needed in response.json()["detail"]
        assert (await _call(c, "pipeline", "POST", "/jobs", **track)).status_code == 200
        replay = await _call(c, "pipeline", "POST", "/jobs/reducto/done-1/replay")
        assert replay.json()["needs"] == "operate"
        assert (await _call(c, "ops", "POST", "/jobs/reducto/done-1/replay",
                            json={"include_succeeded": True})).status_code == 200  # fmt: skip
        bulk = await _call(c, "ops", "POST", "/jobs/replay", json={"source": "reducto"})
        assert bulk.status_code == 200
        assert (await _call(c, "ops", "POST", "/jobs/reprocess")).json()["needs"] == "admin"
        assert (await _call(c, "ops", "GET", "/audit")).json()["needs"] == "admin"
        assert (await c.get("/jobs", headers={"Authorization": "Bearer nobody"})).status_code == 401
        page = (await _call(c, "boss", "GET", "/audit")).json()
    rows = {(e["token"], e["action"], e["outcome"]): e for e in page["entries"]}
    assert rows["pipeline", "track_job", "ok"]["target"] == "reducto/job-1"
    assert rows["pipeline", "track_job", "ok"]["role"] == "track"
    assert rows["ops", "replay_job", "ok"]["jobs"] == 1
    assert rows["ops", "replay_jobs", "ok"]["ref"] == bulk.json()["replay_id"]
    assert '"source":"reducto"' in rows["ops", "replay_jobs", "ok"]["target"].replace(" ", "")
    for who, action in [("viewer", "track_job"), ("viewer", "replay_job"),
                        ("viewer", "reprocess_job"), ("pipeline", "replay_job"),
                        ("ops", "reprocess_jobs"), ("ops", "list_audit")]:  # fmt: skip
        assert rows[who, action, "forbidden"]["attempts"] == 1, (who, action)
    assert rows["", "list_jobs", "unauthorized"]["client"] == "127.0.0.1"
    assert all(s not in str(page) for s in [*SECRETS.values(), "nobody"])
    assert not any(e["outcome"] == "started" for e in page["entries"])


async def test_audit_pages_and_filters_by_token_and_action(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as c:
        for i in range(3):
            job = {"source": "reducto", "job_id": f"j{i}"}
            assert (await _call(c, "pipeline", "POST", "/jobs", json=job)).status_code == 200
        await _call(c, "viewer", "POST", "/jobs", json={"source": "reducto", "job_id": "x"})
        first = (await _call(c, "boss", "GET", "/audit?token=pipeline&limit=2")).json()
        rest = await _call(c, "boss", "GET", f"/audit?token=pipeline&cursor={first['next_cursor']}")
        by_action = (await _call(c, "boss", "GET", "/audit?action=track_job")).json()
        bad = await _call(c, "boss", "GET", "/audit?cursor=nope")
    targets = [e["target"] for e in first["entries"] + rest.json()["entries"]]
    assert targets == ["reducto/j2", "reducto/j1", "reducto/j0"]
    assert len(by_action["entries"]) == 4  # three tracked, one refused
    assert bad.status_code == 400


async def test_the_openapi_document_names_each_routes_role(tmp_path: Path) -> None:
    app = create_app(load_settings(token_config(tmp_path), environ={}))
    async with live_server(app) as served, httpx.AsyncClient(base_url=served) as c:
        paths = (await c.get("/openapi.json")).json()["paths"]
    assert paths["/jobs"]["get"]["x-jobhook-role"] == "read"
    assert paths["/jobs"]["post"]["x-jobhook-role"] == "track"
    assert paths["/jobs/replay"]["post"]["x-jobhook-role"] == "operate"
    assert paths["/jobs/reprocess"]["post"]["x-jobhook-role"] == "admin"
    assert paths["/audit"]["get"]["x-jobhook-role"] == "admin"
    assert "403" in paths["/jobs/{source}/{job_id}/replay"]["post"]["responses"]
    assert "limited to some sources" in paths["/jobs"]["get"]["description"]
    assert "x-jobhook-role" not in paths["/healthz"]["get"]


async def test_refusals_are_counted_by_reason(tmp_path: Path) -> None:
    app = create_app(load_settings(token_config(tmp_path), environ={}))
    async with live_server(app) as served, httpx.AsyncClient(base_url=served) as c:
        await c.get("/jobs")
        await c.get("/jobs", headers={"Authorization": "Bearer wrong"})
        await _call(c, "viewer", "POST", "/jobs/replay")
        text = (await c.get("/metrics")).text
    for reason in ("missing_token", "wrong_token", "forbidden"):
        assert f'jobhook_admin_refused_total{{reason="{reason}"}} 1.0' in text


async def test_a_rotated_file_secret_works_after_a_reload_and_the_old_one_stops(
    tmp_path: Path,
) -> None:
    secret_file = tmp_path / "ops-token"
    secret_file.write_text("first-ops-secret\n", encoding="utf-8")
    extra = (
        f'[[server.tokens]]\nname = "rotated"\nrole = "operate"\nsecrets = ["file:{secret_file}"]'
    )
    config = token_config(tmp_path)
    config.write_text(config.read_text(encoding="utf-8") + extra, encoding="utf-8")
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as served, httpx.AsyncClient(base_url=served) as c:
        old = {"Authorization": "Bearer first-ops-secret"}
        assert (await c.get("/jobs", headers=old)).status_code == 200
        secret_file.write_text("second-ops-secret\n", encoding="utf-8")
        assert await Reloader(app, config).reload("test")
        assert (await c.get("/jobs", headers=old)).status_code == 401
        new = {"Authorization": "Bearer second-ops-secret"}
        assert (await c.get("/jobs", headers=new)).status_code == 200


async def test_a_reload_applies_a_changed_role_from_the_next_request(tmp_path: Path) -> None:
    config = token_config(tmp_path)
    app = create_app(load_settings(config, environ={}))
    async with live_server(app) as served, httpx.AsyncClient(base_url=served) as c:
        assert (await _call(c, "viewer", "POST", "/jobs/replay")).status_code == 403
        text = config.read_text(encoding="utf-8").replace('role = "read"', 'role = "operate"')
        config.write_text(text, encoding="utf-8")
        assert await Reloader(app, config).reload("test")
        assert (await _call(c, "viewer", "POST", "/jobs/replay")).status_code == 200


async def test_the_admin_token_alone_is_one_admin_token_named_admin(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[server]\nadmin_token = "{TOKEN}"\n'
        f'[sources.reducto]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n',
        encoding="utf-8",
    )
    app = create_app(load_settings(config, environ={}))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with live_server(app) as served, httpx.AsyncClient(base_url=served, headers=auth) as c:
        assert (await c.post("/jobs", json={"source": "reducto", "job_id": "a"})).status_code == 200
        entries = (await c.get("/audit")).json()["entries"]
    assert [(e["token"], e["role"], e["action"]) for e in entries] == [
        ("admin", "admin", "track_job")
    ]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, Any]]:
    """A served app and its store."""
    async with _store_url(request.param) as store:
        app = create_app(load_settings(token_config(tmp_path, store=store), environ={}))
        async with live_server(app) as url:
            yield url, app.state.store


async def _delivered(c: httpx.AsyncClient, job_id: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = (await _call(c, "viewer", "GET", f"/jobs/reducto/{job_id}")).json()
        if [d["state"] for d in found["dispatches"]] == ["succeeded"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{job_id} was not delivered")


async def _entries(c: httpx.AsyncClient, action: str) -> list[tuple[str, str, Any]]:
    page = (await _call(c, "boss", "GET", f"/audit?action={action}")).json()
    return [(e["target"], e["outcome"], e["jobs"]) for e in page["entries"]]


async def test_a_track_and_a_replay_leave_one_row_each_written_with_their_effect(
    served: tuple[str, Any],
) -> None:
    url, store = served
    async with httpx.AsyncClient(base_url=url) as c:
        await deliver(c, "done-1")
        await _delivered(c, "done-1")
        track = {"json": {"source": "reducto", "job_id": "job-1"}}
        assert (await _call(c, "pipeline", "POST", "/jobs", **track)).status_code == 200
        again = {"json": {"include_succeeded": True}}
        assert (await _call(c, "ops", "POST", "/jobs/reducto/done-1/replay", **again)).json() == {
            "requeued": 1
        }
        assert await _entries(c, "track_job") == [("reducto/job-1", "ok", 1)]
        assert await _entries(c, "replay_job") == [("reducto/done-1", "ok", 1)]
        # The effect fails (the database refuses the job): its row says so, written apart.
        await inject_fault(store, "jobs", "INSERT", "NEW.job_id = 'doomed'")
        doomed = {"json": {"source": "reducto", "job_id": "doomed"}}
        assert (await _call(c, "pipeline", "POST", "/jobs", **doomed)).status_code == 503
        assert (await _call(c, "viewer", "GET", "/jobs/reducto/doomed")).status_code == 404
        assert (await _entries(c, "track_job"))[0] == ("reducto/doomed", "failed", None)
        # The row cannot be written with the effect: the effect does not stand either, and
        # the failure's own row (written apart) records the attempt.
        await inject_fault(store, "audit", "INSERT", "NEW.outcome = 'ok'")
        lost = {"json": {"source": "reducto", "job_id": "job-2"}}
        assert (await _call(c, "pipeline", "POST", "/jobs", **lost)).status_code == 503
        assert (await _call(c, "viewer", "GET", "/jobs/reducto/job-2")).status_code == 404
        replay = await _call(c, "ops", "POST", "/jobs/reducto/done-1/replay", **again)
        assert replay.status_code == 503
        assert (await _entries(c, "track_job"))[0] == ("reducto/job-2", "failed", None)
        assert (await _entries(c, "replay_job"))[0] == ("reducto/done-1", "failed", None)
        assert len(await _entries(c, "replay_job")) == 2
