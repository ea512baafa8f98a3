"""Each simulated provider's job and list endpoints answer with the fixtures' shapes over time."""

from __future__ import annotations

import httpx
import pytest

from receiver.sim import ManualClock, Simulator, build_app
from receiver.sim.shapes.base import iso
from tests.sim.helpers import API_KEY, auth, fixture, shape_of
from tests.support import live_server

JOB_PATHS = {
    "reducto": "/job/{}",
    "docurift": "/v1/documents/{}",
    "knowhere": "/v1/jobs/{}",
    "docextract": "/v1/documents/{}",
}
# Status words in order, and for each word the fixture sample its body must be shaped like.
SUCCESS = {
    "reducto": {
        "Pending": "job_pending",
        "InProgress": "job_pending",
        "Completing": "job_pending",
        "Completed": "job_completed_full",
    },
    "docurift": {
        "pending": "job_processing",
        "processing": "job_processing",
        "completed": "job_completed",
    },
    "knowhere": {
        "waiting-file": "job_running",
        "pending": "job_running",
        "converting": "job_running",
        "running": "job_running",
        "done": "job_done",
    },
    "docextract": {"queued": "job_queued", "processing": None, "completed": "job_completed"},
}
FAILURE = {
    "reducto": ["Pending", "InProgress", "Failed"],
    "docurift": ["pending", "processing", "failed"],
    "knowhere": ["waiting-file", "pending", "converting", "running", "failed"],
    "docextract": ["queued", "processing", "failed"],
}


async def _walk(provider: str, outcome: str, **create: object) -> list[dict[str, object]]:
    """GET one 10-second job every quarter second of its life, on a manual clock."""
    clock = ManualClock()
    sim = Simulator(provider, api_key=API_KEY, clock=clock, requests_per_minute=10_000)
    (job_id,) = sim.create_jobs(duration=10, pages=8, outcome=outcome, **create)
    bodies = []
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        for _ in range(42):
            response = await client.get(JOB_PATHS[provider].format(job_id), headers=auth(provider))
            assert response.status_code == 200
            bodies.append(response.json())
            clock.advance(0.25)
    return bodies


def _word(provider: str, body: dict[str, object]) -> str:
    holder = body["data"] if provider == "docurift" else body
    assert isinstance(holder, dict)
    word = holder["status"]
    assert isinstance(word, str)
    return word


def _sequence(provider: str, bodies: list[dict[str, object]]) -> list[str]:
    words: list[str] = []
    for body in bodies:
        word = _word(provider, body)
        if not words or words[-1] != word:
            words.append(word)
    return words


@pytest.mark.parametrize("provider", sorted(SUCCESS))
async def test_successful_job_moves_through_the_provider_words_with_fixture_shapes(
    provider: str,
) -> None:
    bodies = await _walk(provider, "succeeded")
    assert _sequence(provider, bodies) == list(SUCCESS[provider])
    samples = fixture(provider)
    for body in bodies:
        sample = SUCCESS[provider][_word(provider, body)]
        if sample is not None:
            assert shape_of(body) == shape_of(samples[sample])


@pytest.mark.parametrize("provider", sorted(FAILURE))
async def test_failed_job_ends_with_the_fixture_failure_body(provider: str) -> None:
    bodies = await _walk(provider, "failed")
    assert _sequence(provider, bodies) == FAILURE[provider]
    # Reducto's answer is the SDK's (reductoai 0.25.0): the guide's, plus the error object.
    sample = "job_failed_sdk" if provider == "reducto" else "job_failed"
    expected = dict(fixture(provider)[sample])
    if provider == "docextract":
        # The sample is trimmed; a document keeps its source and extractor (DESIGN.md), which
        # is what reprocessing submits again.
        expected.update({"extractor_id": "", "document_url": "", "mime_type": ""})
    assert shape_of(bodies[-1]) == shape_of(expected)


async def test_reducto_url_result_has_the_fixture_url_shape() -> None:
    bodies = await _walk("reducto", "succeeded", result="url")
    assert shape_of(bodies[-1]) == shape_of(fixture("reducto")["job_completed_url"])


async def test_docextract_processing_adds_started_at_to_the_queued_body() -> None:
    bodies = await _walk("docextract", "succeeded")
    processing = next(b for b in bodies if b["status"] == "processing")
    assert list(processing) == [*fixture("docextract")["job_queued"], "started_at"]


async def test_progress_only_moves_forward_and_reaches_the_page_count() -> None:
    knowhere = await _walk("knowhere", "succeeded")
    pages = [b["progress"]["processed_pages"] for b in knowhere]
    assert pages == sorted(pages)
    assert pages[-1] == 8
    assert len(set(pages)) > 3
    reducto = await _walk("reducto", "succeeded")
    fractions = [float(b["progress"]) for b in reducto]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0


async def test_speed_makes_jobs_finish_sooner_in_real_time() -> None:
    clock = ManualClock()
    sim = Simulator("knowhere", api_key=API_KEY, clock=clock, speed=10.0)
    (job_id,) = sim.create_jobs(duration=100)
    clock.advance(9.9)
    assert sim.status(job_id) == "running"
    clock.advance(0.1)
    assert sim.status(job_id) == "done"


async def test_unknown_job_is_404_in_the_provider_style() -> None:
    sim = Simulator("knowhere", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.get("/v1/jobs/job_nope", headers=auth("knowhere"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("provider", "path", "id_key"),
    [
        ("reducto", "/jobs", "job_id"),
        ("knowhere", "/v1/jobs", "job_id"),
        ("docextract", "/v1/documents", "id"),
    ],
)
async def test_list_endpoint_pages_through_every_job_newest_first(
    provider: str, path: str, id_key: str
) -> None:
    sim = Simulator(provider, api_key=API_KEY)
    ids = sim.create_jobs(5)
    seen: list[str] = []
    params: dict[str, str | int] = {"limit": 2}
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        for _ in range(5):
            body = (await client.get(path, params=params, headers=auth(provider))).json()
            seen += [item[id_key] for item in body["jobs"]]
            if provider == "docextract":
                assert body["total"] == 5
                if body["offset"] + len(body["jobs"]) >= body["total"]:
                    break
                params["offset"] = body["offset"] + len(body["jobs"])
            else:
                if body["next_cursor"] is None:
                    break
                params["cursor"] = body["next_cursor"]
    assert seen == ids[::-1]


async def test_reducto_list_items_have_the_fixture_shape() -> None:
    sim = Simulator("reducto", api_key=API_KEY)
    sim.create_jobs(1)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        body = (await client.get("/jobs", headers=auth("reducto"))).json()
    assert shape_of(body) == {**shape_of(fixture("reducto")["list_jobs"]), "next_cursor": "null"}


@pytest.mark.parametrize(
    ("provider", "path"), [("knowhere", "/v1/jobs"), ("docextract", "/v1/documents")]
)
async def test_list_status_filter_keeps_only_that_word(provider: str, path: str) -> None:
    clock = ManualClock()
    sim = Simulator(provider, api_key=API_KEY, clock=clock)
    done = sim.create_jobs(2, duration=1)
    clock.advance(2)
    sim.create_jobs(3, duration=100)
    word = "done" if provider == "knowhere" else "completed"
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        body = (await client.get(path, params={"status": word}, headers=auth(provider))).json()
        bad = await client.get(path, params={"status": "bogus"}, headers=auth(provider))
    key = "job_id" if provider == "knowhere" else "id"
    assert sorted(item[key] for item in body["jobs"]) == sorted(done)
    assert bad.status_code == 400


async def test_docextract_list_filters_by_creation_time() -> None:
    clock = ManualClock(start=1_790_000_000.0)
    sim = Simulator("docextract", api_key=API_KEY, clock=clock)
    early = sim.create_jobs(2)
    clock.advance(3600)
    sim.create_jobs(1)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        params = {"created_before": iso(1_790_000_000.0 + 1800)}
        body = (await client.get("/v1/documents", params=params, headers=auth("docextract"))).json()
    assert sorted(item["id"] for item in body["jobs"]) == sorted(early)
