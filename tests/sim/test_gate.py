"""Auth, rate budgets, injected faults and the request log, through a real loopback server."""

from __future__ import annotations

import time

import httpx
import pytest

from receiver.sim import ManualClock, Simulator, build_app, key_hash
from tests.sim.helpers import API_KEY, auth
from tests.support import live_server

PATHS = {
    "reducto": "/job/{}",
    "docurift": "/v1/documents/{}",
    "knowhere": "/v1/jobs/{}",
    "docextract": "/v1/documents/{}",
}


def _sim(provider: str, **options: object) -> tuple[Simulator, str]:
    sim = Simulator(provider, api_key=API_KEY, **options)
    (job_id,) = sim.create_jobs()
    return sim, PATHS[provider].format(job_id)


@pytest.mark.parametrize("provider", sorted(PATHS))
async def test_requests_without_the_right_key_are_401(provider: str) -> None:
    sim, path = _sim(provider)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        missing = await client.get(path)
        wrong = await client.get(path, headers=auth(provider, "not-the-key"))
        right = await client.get(path, headers=auth(provider))
    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)


async def test_docurift_does_not_accept_the_key_as_a_bearer_token() -> None:
    sim, path = _sim("docurift")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get(path, headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


async def test_bearer_providers_do_not_accept_x_api_key() -> None:
    sim, path = _sim("reducto")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get(path, headers={"X-API-Key": API_KEY})
    assert response.status_code == 401


async def test_knowhere_budget_answers_429_with_headers_and_body_hint_past_60() -> None:
    clock = ManualClock()
    sim, path = _sim("knowhere", clock=clock)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        answers = []
        for _ in range(61):
            answers.append(await client.get(path, headers=auth("knowhere")))
            clock.advance(0.5)
        limited = answers[-1]
    assert [a.status_code for a in answers[:60]] == [200] * 60
    assert [a.headers["RateLimit-Remaining"] for a in answers[:3]] == ["59", "58", "57"]
    assert answers[0].headers["RateLimit-Limit"] == "60"
    assert limited.status_code == 429
    assert limited.headers["RateLimit-Remaining"] == "0"
    retry_after = int(limited.headers["Retry-After"])
    assert 0 < retry_after <= 60
    assert limited.headers["RateLimit-Reset"] == str(retry_after)
    error = limited.json()["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED"
    assert error["details"]["retry_after"] == retry_after


async def test_budget_frees_up_once_the_retry_after_has_passed() -> None:
    clock = ManualClock()
    sim, path = _sim("reducto", clock=clock, requests_per_minute=3)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        for _ in range(3):
            assert (await client.get(path, headers=auth("reducto"))).status_code == 200
        refused = await client.get(path, headers=auth("reducto"))
        assert refused.status_code == 429
        assert refused.json() == {"detail": "Rate limit exceeded"}
        clock.advance(int(refused.headers["Retry-After"]) - 1)
        assert (await client.get(path, headers=auth("reducto"))).status_code == 429
        clock.advance(1)
        assert (await client.get(path, headers=auth("reducto"))).status_code == 200


async def test_docextract_uses_x_ratelimit_headers() -> None:
    sim, path = _sim("docextract", requests_per_minute=1)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        ok = await client.get(path, headers=auth("docextract"))
        refused = await client.get(path, headers=auth("docextract"))
    assert ok.headers["X-RateLimit-Limit"] == "1"
    assert ok.headers["X-RateLimit-Remaining"] == "0"
    assert "RateLimit-Limit" not in ok.headers
    assert refused.status_code == 429
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert int(refused.headers["Retry-After"]) >= 1


async def test_each_api_key_has_its_own_budget() -> None:
    sim = Simulator("knowhere", api_key=[API_KEY, "second-key-abcdef012345"], requests_per_minute=1)
    (job_id,) = sim.create_jobs()
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        first = await client.get(f"/v1/jobs/{job_id}", headers=auth("knowhere"))
        other = await client.get(
            f"/v1/jobs/{job_id}", headers=auth("knowhere", "second-key-abcdef012345")
        )
        again = await client.get(f"/v1/jobs/{job_id}", headers=auth("knowhere"))
    assert (first.status_code, other.status_code, again.status_code) == (200, 200, 429)


async def test_injected_429_carries_retry_after_in_header_and_knowhere_body() -> None:
    sim, path = _sim("knowhere")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        injected = await client.post(
            "/_sim/faults", json={"status": 429, "count": 2, "retry_after": 7}
        )
        answers = [await client.get(path, headers=auth("knowhere")) for _ in range(3)]
    assert injected.status_code == 201
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["Retry-After"] == "7"
    assert answers[0].json()["error"]["details"]["retry_after"] == 7


async def test_injected_5xx_answers_then_recovers() -> None:
    sim, path = _sim("docurift")
    sim.inject(status=503, count=1)
    sim.inject(status=500, count=1)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        answers = [await client.get(path, headers=auth("docurift")) for _ in range(3)]
    assert [a.status_code for a in answers] == [503, 500, 200]
    assert answers[0].json()["success"] is False


async def test_injected_latency_delays_the_answer() -> None:
    sim, path = _sim("reducto")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        await client.post("/_sim/faults", json={"latency": 0.4})
        started = time.monotonic()
        slow = await client.get(path, headers=auth("reducto"))
        slow_took = time.monotonic() - started
        started = time.monotonic()
        await client.get(path, headers=auth("reducto"))
        fast_took = time.monotonic() - started
    assert slow.status_code == 200
    assert slow_took >= 0.4
    assert fast_took < 0.4


async def test_faults_can_be_cleared_and_bad_fault_requests_are_400() -> None:
    sim, path = _sim("reducto")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        empty = await client.post("/_sim/faults", json={"count": 2})
        wrong_target = await client.post("/_sim/faults", json={"truncate": 5, "target": "api"})
        await client.post("/_sim/faults", json={"status": 500, "count": 5})
        cleared = await client.delete("/_sim/faults")
        answer = await client.get(path, headers=auth("reducto"))
    assert (empty.status_code, wrong_target.status_code) == (400, 400)
    assert cleared.status_code == 204
    assert answer.status_code == 200


async def test_log_records_every_api_request_with_status_reason_and_key_hash() -> None:
    clock = ManualClock()
    sim, path = _sim("knowhere", clock=clock, requests_per_minute=2)
    sim.inject(status=502)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        await client.get(path, headers=auth("knowhere"))
        await client.get(path, headers=auth("knowhere", "wrong-key"))
        await client.get(path)
        await client.get("/v1/jobs/job_missing", headers=auth("knowhere"))
        await client.get(path, headers=auth("knowhere"))
        await client.get(path, headers=auth("knowhere"))
        await client.get("/_sim/jobs")
        served = await client.get("/_sim/log")
    entries = served.json()["entries"]
    summary = [(e["status"], e["reason"]) for e in entries]
    assert summary == [
        (502, "fault"),
        (401, "unauthorized"),
        (401, "unauthorized"),
        (404, "not_found"),
        (200, "ok"),
        (429, "rate_limited"),
    ]
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5, 6]
    assert entries[0]["key"] == key_hash(API_KEY)
    assert entries[1]["key"] == key_hash("wrong-key")
    assert entries[2]["key"] is None
    assert entries[5]["retry_after"] is not None
    assert all(e["path"].startswith("/v1/jobs/") and e["t"] == clock.time() for e in entries)
    assert API_KEY not in served.text
    assert "wrong-key" not in served.text


async def test_log_can_be_read_incrementally() -> None:
    sim, path = _sim("reducto")
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        await client.get(path, headers=auth("reducto"))
        first = (await client.get("/_sim/log")).json()
        await client.get(path, headers=auth("reducto"))
        rest = (await client.get("/_sim/log", params={"since": first["last_seq"]})).json()
    assert [e["seq"] for e in rest["entries"]] == [2]
    assert len(sim.log) == 2
