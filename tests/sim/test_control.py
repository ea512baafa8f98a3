"""The ``/_sim`` control API: jobs are created and inspected over HTTP."""

from __future__ import annotations

import httpx

from receiver.sim import ManualClock, Simulator, build_app
from tests.sim.helpers import API_KEY, auth
from tests.support import live_server


async def test_jobs_created_over_http_are_served_by_the_provider_api() -> None:
    sim = Simulator("knowhere", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        created = await client.post("/_sim/jobs", json={"count": 3, "pages": 12, "duration": 60})
        ids = created.json()["job_ids"]
        job = await client.get(f"/v1/jobs/{ids[0]}", headers=auth("knowhere"))
        view = await client.get(f"/_sim/jobs/{ids[0]}")
        listing = await client.get("/_sim/jobs")
    assert created.status_code == 201
    assert len(ids) == len(set(ids)) == 3
    assert job.json()["progress"]["total_pages"] == 12
    assert view.json()["pages"] == 12
    assert view.json()["status"] == "waiting-file"
    assert [j["job_id"] for j in listing.json()["jobs"]] == ids


async def test_invalid_job_requests_are_400() -> None:
    sim = Simulator("docurift", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        url_result = await client.post("/_sim/jobs", json={"result": "url"})
        negative = await client.post("/_sim/jobs", json={"count": 0})
        unknown = await client.post("/_sim/jobs", json={"colour": "red"})
        broken = await client.post("/_sim/jobs", content=b"{")
    assert [r.status_code for r in (url_result, negative, unknown, broken)] == [400] * 4
    assert "docurift results are inline" in url_result.json()["detail"]
    assert len(sim.jobs) == 0


async def test_unknown_job_view_is_404() -> None:
    sim = Simulator("reducto", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/_sim/jobs/nope")
    assert response.status_code == 404


async def test_job_ids_are_reproducible_with_the_seed() -> None:
    first = Simulator("reducto", api_key=API_KEY, seed=3).create_jobs(4)
    again = Simulator("reducto", api_key=API_KEY, seed=3).create_jobs(4)
    other = Simulator("reducto", api_key=API_KEY, seed=4).create_jobs(4)
    assert first == again
    assert first != other


async def test_describe_names_the_provider_and_budget_without_secrets() -> None:
    sim = Simulator("knowhere", api_key=API_KEY, clock=ManualClock())
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/_sim")
    assert response.json()["provider"] == "knowhere"
    assert response.json()["requests_per_window"] == 60
    assert API_KEY not in response.text
