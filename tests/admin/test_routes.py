"""The admin API over a real server and SQLite file: auth, each route and its filters."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from receiver.service.app import create_app
from receiver.service.openapi import OPERATIONS, mounted
from tests.adminsupport import AUTH, TOKEN, admin_settings, deliver
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

ADMIN_ROUTES = [
    ("GET", "/jobs"),
    ("POST", "/jobs"),
    ("GET", "/jobs/stats"),
    ("GET", "/jobs/export"),
    ("GET", "/jobs/reducto/job-1"),
    ("GET", "/jobs/reducto/job-1/wait?timeout=0"),
    ("POST", "/jobs/reducto/job-1/replay"),
    ("GET", "/events"),
]


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(admin_settings(tmp_path))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
        yield c


async def _ids(client: httpx.AsyncClient, **params: Any) -> list[str]:
    response = await client.get("/jobs", params=params)
    assert response.status_code == 200, response.text
    return [job["job_id"] for job in response.json()["jobs"]]


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"},
     {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer"}],
    ids=["no-token", "wrong-token", "wrong-scheme", "longer-token", "empty-bearer"],
)  # fmt: skip
async def test_every_admin_route_answers_401_without_the_right_token(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    client.headers.pop("Authorization")
    for method, path in ADMIN_ROUTES:
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 401, (method, path)
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in response.text


async def test_admin_routes_are_off_without_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(admin_settings(tmp_path, token=None))
    async with live_server(app) as url, httpx.AsyncClient(base_url=url, headers=AUTH) as c:
        answers = [(await c.request(m, p)).status_code for m, p in ADMIN_ROUTES]
        assert (await c.get("/metrics")).status_code == 200
        paths = (await c.get("/openapi.json")).json()["paths"]
    assert answers == [404] * len(ADMIN_ROUTES)
    assert "/jobs" not in paths
    captured = capsys.readouterr()
    assert "admin_routes_off" in captured.out + captured.err


async def test_list_filters_by_source_state_time_and_metadata(client: httpx.AsyncClient) -> None:
    await deliver(client, "a", customer="acme", tier="gold")
    await deliver(client, "b", status="Failed", customer="zen")
    middle = time.time()
    await deliver(client, "c", customer="acme")
    await client.post("/jobs", json={"source": "reducto", "job_id": "t", "metadata": {"x": 1}})
    assert await _ids(client) == ["t", "c", "b", "a"]
    assert await _ids(client, state="failed") == ["b"]
    assert await _ids(client, state="queued") == ["t"]
    assert await _ids(client, source="reducto", state="succeeded") == ["c", "a"]
    assert await _ids(client, source="other") == []
    assert await _ids(client, created_after=str(middle)) == ["t", "c"]
    assert await _ids(client, created_before=str(middle)) == ["b", "a"]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle - 3600))
    assert await _ids(client, created_after=iso + "Z") == ["t", "c", "b", "a"]
    acme = await client.get("/jobs", params=[("metadata", "customer:acme")])
    assert [j["job_id"] for j in acme.json()["jobs"]] == ["c", "a"]
    both = await client.get(
        "/jobs", params=[("metadata", "customer:acme"), ("metadata", "tier:gold")]
    )
    assert [j["job_id"] for j in both.json()["jobs"]] == ["a"]
    assert await _ids(client, metadata="x:1") == ["t"]


async def test_list_pages_with_an_opaque_cursor_until_it_is_null(
    client: httpx.AsyncClient,
) -> None:
    for n in range(5):
        await deliver(client, f"job-{n}")
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = (await client.get("/jobs", params=params)).json()
        seen += [job["job_id"] for job in page["jobs"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == [f"job-{n}" for n in reversed(range(5))]


@pytest.mark.parametrize(
    "params",
    [{"limit": "0"}, {"limit": "501"}, {"limit": "x"}, {"state": "done"},
     {"created_after": "yesterday"}, {"metadata": "nocolon"}, {"min_confidence": "high"},
     {"error_code": "x" * 101}, {"cursor": "!!!"}, {"cursor": "bm90IGpzb24"},
     {"max_confidence": "0.8"}, {"field": "total", "max_confidence": "low"},
     {"field": "total", "max_confidence": "nan"}, {"field": "x" * 201}, {"field": "a\x00"}],
    ids=["limit-0", "limit-big", "limit-word", "state", "time", "metadata", "confidence",
         "error-code", "cursor-garbage", "cursor-not-ours", "max-confidence-alone",
         "max-confidence-word", "max-confidence-nan", "field-long", "field-control"],
)  # fmt: skip
async def test_list_refuses_bad_filters_with_400(
    client: httpx.AsyncClient, params: dict[str, str]
) -> None:
    response = await client.get("/jobs", params=params)
    assert (response.status_code, response.json()["error"]) == (400, "invalid_query")


async def test_list_filters_by_normalised_error_code(client: httpx.AsyncClient) -> None:
    await deliver(client, "ok")
    await deliver(client, "bad", status="Failed")
    assert await _ids(client, error_code="provider_failed") == ["bad"]
    assert await _ids(client, error_code="http_5xx") == []
    (job,) = (await client.get("/jobs", params={"state": "failed"})).json()["jobs"]
    assert job["failure"] == {"code": "provider_failed", "message": None, "where": "provider"}


async def test_show_has_deliveries_completion_and_dispatches(client: httpx.AsyncClient) -> None:
    await deliver(client, "job-1", msg_id="m1", status="Pending")
    await deliver(client, "job-1", msg_id="m2")
    await deliver(client, "job-1", msg_id="m2")  # a duplicate is not a second delivery
    detail = (await client.get("/jobs/reducto/job-1/wait", params={"timeout": 5})).json()
    assert detail["job"]["state"] == "succeeded"
    assert detail["job"]["terminal"] is True
    assert [d["message_id"] for d in detail["deliveries"]] == ["m1", "m2"]
    assert detail["completion"]["state"] == "succeeded"
    async with asyncio.timeout(10):  # the file handler runs soon after the commit
        while (detail := (await client.get("/jobs/reducto/job-1")).json())["dispatches"][0][
            "state"
        ] != "succeeded":
            await asyncio.sleep(0.02)
    assert detail["dispatches"] == [
        {"handler": "files", "state": "succeeded", "attempts": 1, "last_error": None,
         "error_code": None, "next_attempt_at": None,
         "updated_at": detail["dispatches"][0]["updated_at"]}
    ]  # fmt: skip
    missing = await client.get("/jobs/reducto/nope")
    assert (missing.status_code, missing.json()["error"]) == (404, "unknown_job")


async def test_fixed_paths_are_not_taken_for_a_job(client: httpx.AsyncClient) -> None:
    stats = await client.get("/jobs/stats")
    export = await client.get("/jobs/export")
    assert stats.status_code == 200
    assert "by_state" in stats.json()
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("application/x-ndjson")


async def test_track_is_idempotent_and_merges_metadata(client: httpx.AsyncClient) -> None:
    body = {"source": "reducto", "job_id": "job-9", "metadata": {"a": "1"}, "pages": 12}
    first = await client.post("/jobs", json=body)
    again = await client.post("/jobs", json={**body, "metadata": {"b": "2"}})
    assert first.status_code == again.status_code == 200
    job = again.json()["job"]
    assert (job["state"], job["provider_status"], job["expected_pages"]) == (
        "queued",
        "tracked",
        12,
    )
    assert job["metadata"] == {"a": "1", "b": "2"}
    assert await _ids(client) == ["job-9"]
    await deliver(client, "job-9")  # the webhook moves it forward; tracking again does not undo
    again = await client.post("/jobs", json=body)
    assert again.json()["job"]["state"] == "succeeded"


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [({"source": "nope", "job_id": "x"}, 404, "unknown_source"),
     ({"source": "reducto"}, 400, "invalid_body"),
     ({"source": "reducto", "job_id": ""}, 400, "invalid_body"),
     ({"source": "reducto", "job_id": "x", "pages": 0}, 400, "invalid_body"),
     ({"source": "reducto", "job_id": "x", "extra": 1}, 400, "invalid_body"),
     ({"source": "reducto", "job_id": "\ud800"}, 400, "invalid_body")],
    ids=["unknown-source", "no-job-id", "empty-job-id", "zero-pages", "unknown-key", "surrogate"],
)  # fmt: skip
async def test_track_refuses_what_it_cannot_store(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, error: str
) -> None:
    response = await client.post("/jobs", content=json.dumps(body))
    assert (response.status_code, response.json()["error"]) == (status, error)


async def test_track_refuses_a_body_that_is_not_json(client: httpx.AsyncClient) -> None:
    response = await client.post("/jobs", content=b"\xff{")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_json")


async def test_track_refuses_json_nested_deeper_than_the_parser_goes(
    client: httpx.AsyncClient,
) -> None:
    """20 KB of brackets: json.loads' RecursionError was a 500."""
    deep = b'{"source": "reducto", "job_id": "j", "metadata": {"k": %s}}' % (
        b"[" * 10_000 + b"]" * 10_000
    )
    response = await client.post("/jobs", content=deep)
    assert (response.status_code, response.json()["error"]) == (400, "invalid_json")


async def test_stats_report_states_sources_rate_and_times(client: httpx.AsyncClient) -> None:
    await deliver(client, "a")
    await deliver(client, "b", status="Failed")
    await client.post("/jobs", json={"source": "reducto", "job_id": "c"})
    stats = (await client.get("/jobs/stats", params={"period": "7d"})).json()
    assert stats["period"] == "7d"
    assert (stats["total"], stats["terminal"], stats["success_rate"]) == (3, 2, 0.5)
    assert stats["by_state"] == {"failed": 1, "queued": 1, "succeeded": 1}
    assert stats["by_source"] == {"reducto": 3}
    assert stats["processing_seconds"]["count"] == 2
    assert set(stats["handler_failures"]) <= {"files"}
    assert stats["errors"]["by_code"] == {"provider_failed": 1}
    assert stats["errors"]["by_where"] == {"provider": 1}
    bad = await client.get("/jobs/stats", params={"period": "1y"})
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_query")


async def test_replay_requeues_and_the_handler_runs_again(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    await deliver(client, "job-1")
    written = tmp_path / "out" / "reducto" / "job-1.json"
    await _until(lambda: written.exists())
    written.unlink()
    nothing = await client.post("/jobs/reducto/job-1/replay")  # nothing is dead
    assert nothing.json() == {"requeued": 0}
    await _until(lambda: _dispatch_done(client))
    again = await client.post("/jobs/reducto/job-1/replay", json={"include_succeeded": True})
    assert again.json() == {"requeued": 1}
    await _until(lambda: written.exists())
    other = await client.post("/jobs/reducto/job-1/replay", json={"handler": "nope"})
    assert other.json() == {"requeued": 0}
    missing = await client.post("/jobs/reducto/nope/replay")
    assert (missing.status_code, missing.json()["error"]) == (404, "unknown_job")


async def test_openapi_describes_exactly_the_mounted_routes(tmp_path: Path) -> None:
    app = create_app(admin_settings(tmp_path))
    assert mounted(app.routes) == set(OPERATIONS)
    async with live_server(app) as url, httpx.AsyncClient(base_url=url) as c:
        document = (await c.get("/openapi.json")).json()
    described = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert described == set(OPERATIONS)


async def _dispatch_done(client: httpx.AsyncClient) -> bool:
    detail = (await client.get("/jobs/reducto/job-1")).json()
    return all(d["state"] == "succeeded" for d in detail["dispatches"])


async def _until(check: Any, seconds: float = 10.0) -> None:
    import asyncio
    import inspect

    async with asyncio.timeout(seconds):
        while True:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await asyncio.sleep(0.02)
