"""Retention: old delivered jobs are purged, undelivered work never is; results can go early."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import time_machine

from receiver.config.settings import RetentionSettings
from receiver.models import State
from receiver.ops.retention import DAY, Retention
from receiver.service.app import create_app
from receiver.sim import Simulator, build_app
from receiver.store import Resolution
from receiver.store.audit import AuditEntry, AuditFilter
from tests.adminsupport import deliver, open_store, record
from tests.support import live_server
from tests.test_pipeline import API_KEY, pipeline_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from receiver.store.sqlite.store import SQLiteStore

T0 = 1_800_000_000.0
NOW = T0 + 10 * DAY
FAR = NOW + 1.0


def _result(results: Path, job_id: str) -> Resolution:
    path = results / "reducto" / f"{job_id}.result"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(job_id.encode())
    digest = hashlib.sha256(job_id.encode()).hexdigest()
    return Resolution(result_path=str(path), result_sha256=digest, result_bytes=len(job_id))


async def _job(store: SQLiteStore, results: Path, job_id: str, *handlers: str) -> None:
    """A job that became terminal at T0, resolved with a result file under ``results``."""
    await record(store, job_id, at=T0, resolve=True, handlers=handlers)
    for row in await store.claim_completions("t", 10, 60, FAR):
        await store.resolve_completion(row.id, "t", _result(results, row.job_id))


async def _finish(store: SQLiteStore, outcomes: dict[str, str | None]) -> None:
    """Claim every due dispatch; finish those named: None succeeds, "dead" dies, absent runs."""
    for dispatch, _ in await store.claim_dispatches("t", 100, 60, FAR):
        if dispatch.handler in outcomes:
            error = outcomes[dispatch.handler]
            await store.finish_dispatch(dispatch.id, "t", error=error, next_attempt_at=None)


def _retention(store: SQLiteStore, results: Path, **settings: Any) -> Retention:
    return Retention(store, RetentionSettings(**settings), results, clock=lambda: NOW)


def _rows(store: SQLiteStore, table: str) -> int:
    with sqlite3.connect(store.path) as db:
        (n,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(n)


async def test_purge_deletes_an_old_delivered_job_with_everything_it_owns(tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with open_store(tmp_path) as store:
        await _job(store, results, "done", "a", "b")
        await _finish(store, {"a": None, "b": None})
        purged, files = await _retention(store, results, max_age_days=2).run_once()
        assert (purged, files) == (1, 1)
        assert not (results / "reducto" / "done.result").exists()
        assert await store.get_job("reducto", "done") is None
        for table in ("jobs", "deliveries", "completions", "dispatches"):
            assert _rows(store, table) == 0, table


@pytest.mark.parametrize(
    ("outcomes", "why"),
    [
        ({}, "dispatch still running"),
        ({"a": None, "b": "dead"}, "one handler is dead: it needs a replay, not a purge"),
        ({"a": None}, "one dispatch still running"),
    ],
    ids=["running", "dead", "half-delivered"],
)
async def test_purge_never_deletes_undelivered_work(
    tmp_path: Path, outcomes: dict[str, str | None], why: str
) -> None:
    results = tmp_path / "results"
    async with open_store(tmp_path) as store:
        await _job(store, results, "job", "a", "b")
        await _finish(store, outcomes)
        assert await _retention(store, results, max_age_days=2).run_once() == (0, 0), why
        assert (results / "reducto" / "job.result").exists()
        assert _rows(store, "dispatches") == 2


async def test_purge_keeps_resolving_pending_and_open_jobs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with open_store(tmp_path) as store:
        await record(store, "resolving", at=T0, resolve=True)  # not confirmed yet
        await record(store, "pending", at=T0)  # its handler has not run
        await record(store, "open", State.RUNNING, at=T0)  # not terminal at all
        assert await _retention(store, results, max_age_days=2).run_once() == (0, 0)
        assert _rows(store, "jobs") == 3


async def test_purge_spares_recent_jobs_and_recent_replays(tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with open_store(tmp_path) as store:
        await _job(store, results, "job", "a")
        await _finish(store, {"a": None})
        assert await _retention(store, results, max_age_days=20).run_once() == (0, 0)
        # Replayed and delivered again an hour ago: the delivery is recent, so the job stays.
        with time_machine.travel(NOW - 3600, tick=False):
            await store.replay(source="reducto", job_id="job", include_succeeded=True)
            await _finish(store, {"a": None})
        assert await _retention(store, results, max_age_days=2).run_once() == (0, 0)


async def test_results_go_as_soon_as_every_handler_succeeded(tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with open_store(tmp_path) as store:
        await _job(store, results, "job", "a", "b")
        retention = _retention(store, results, delete_results_when_delivered=True)
        await _finish(store, {"a": None})
        assert await retention.run_once() == (0, 0)
        assert (results / "reducto" / "job.result").exists()
        await store.replay(source="reducto", job_id="job")  # nothing dead: no change
        for dispatch, _ in await store.claim_dispatches("t2", 10, 60, FAR + 120):
            await store.finish_dispatch(dispatch.id, "t2", error=None, next_attempt_at=None)
        assert await retention.run_once() == (0, 1)
        assert not (results / "reducto" / "job.result").exists()
        completion = await store.completion_for("reducto", "job")
        assert completion is not None
        assert completion.result_path is None
        assert completion.result_sha256 == hashlib.sha256(b"job").hexdigest()
        assert await store.get_job("reducto", "job") is not None  # only the file went


async def test_files_outside_the_results_directory_are_never_deleted(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    async with open_store(tmp_path) as store:
        await _job(store, outside, "job", "a")
        await _finish(store, {"a": None})
        retention = _retention(store, tmp_path / "results", delete_results_when_delivered=True)
        assert await retention.run_once() == (0, 0)
    assert (outside / "reducto" / "job.result").exists()


async def test_retention_is_off_unless_configured(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        retention = _retention(store, tmp_path)
        assert not retention.enabled
        await asyncio.wait_for(retention.run(asyncio.Event()), 1)  # returns at once


async def test_audit_rows_go_after_their_age_but_never_before_their_job(tmp_path: Path) -> None:
    async with open_store(tmp_path) as store:
        await record(store, "kept", State.QUEUED, at=T0)  # never terminal: never purged
        for target, at in (("reducto/kept", T0), ("reducto/gone", T0), ("reducto/new", NOW)):
            source, _, job_id = target.partition("/")
            entry = AuditEntry(at=at, token="ops", role="operate", action="replay_job",
                               target=target, request_id="r", client="10.0.0.1",
                               source=source, job_id=job_id)  # fmt: skip
            await store.audit_start(entry)
        retention = _retention(store, tmp_path, max_age_days=2, audit_max_age_days=5)
        assert retention.enabled
        await retention.run_once()
        rows = await store.audit_rows(AuditFilter(), after_id=None, limit=10)
    assert sorted(r.target for r in rows) == ["reducto/kept", "reducto/new"]


@pytest.fixture
async def sim() -> AsyncIterator[tuple[Simulator, str]]:
    simulator = Simulator("reducto", api_key=API_KEY, duration=0.0, result_bytes=1024)
    async with live_server(build_app(simulator)) as url:
        yield simulator, url


async def test_the_service_deletes_a_delivered_result_right_after_the_handler(
    tmp_path: Path, sim: tuple[Simulator, str]
) -> None:
    simulator, sim_url = sim
    (job_id,) = simulator.create_jobs(1, result="inline")
    extra = "[retention]\ndelete_results_when_delivered = true\ninterval_seconds = 3600\n"
    settings = pipeline_settings(tmp_path, sim_url, extra=extra)
    written = tmp_path / "out" / "reducto" / f"{job_id}.result"
    kept = settings.results.dir / "reducto" / f"{job_id}.result"
    async with live_server(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as c:
        assert (await deliver(c, job_id)).status_code == 200
        async with asyncio.timeout(20):
            while not written.exists() or kept.exists():
                await asyncio.sleep(0.02)
    assert written.read_bytes()  # the handler got the result; jobhook's own copy is gone
