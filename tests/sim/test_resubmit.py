"""The DocExtract simulator takes a failed document back as its API does (``POST
/v1/documents`` with the ``document_url`` and ``extractor_id`` its failed job shows), and the
new job's fate is deterministic: a transient failure does not repeat, the document's own does."""

from __future__ import annotations

import httpx
import pytest

from receiver.errors import ConfigError
from receiver.sim import Simulator, build_app
from receiver.sim.clock import ManualClock
from tests.sim.helpers import API_KEY, auth
from tests.support import live_server


@pytest.mark.parametrize(
    ("code", "outcome"),
    [("processing_timeout", "completed"), ("extraction_failed", "failed"),
     ("unsupported_format", "failed")],
)  # fmt: skip
async def test_a_failed_document_submitted_again_fails_again_only_for_its_own_fault(
    code: str, outcome: str
) -> None:
    clock = ManualClock()
    sim = Simulator("docextract", api_key=API_KEY, clock=clock, duration=1.0)
    (old,) = sim.create_jobs(outcome="failed", error_code=code)
    clock.advance(2)
    async with (
        live_server(build_app(sim)) as url,
        httpx.AsyncClient(base_url=url, headers=auth("docextract")) as client,
    ):
        failed = (await client.get(f"/v1/documents/{old}")).json()
        assert failed["status"] == "failed"
        resubmitted = await client.post("/v1/documents", json={
            "document_url": failed["document_url"], "extractor_id": failed["extractor_id"],
            "metadata": {"reprocessed_from": old}})  # fmt: skip
        assert resubmitted.status_code == 201
        new = resubmitted.json()["id"]
        clock.advance(2)
        answer = (await client.get(f"/v1/documents/{new}")).json()
    assert new != old
    assert answer["status"] == outcome
    assert answer["document_url"] == failed["document_url"]
    if outcome == "failed":
        assert answer["error_details"]["code"] == code
    assert sim.job_view(new)["metadata"] == {"reprocessed_from": old}  # type: ignore[index]


async def test_a_new_document_is_unaffected_by_another_documents_failure() -> None:
    clock = ManualClock()
    sim = Simulator("docextract", api_key=API_KEY, clock=clock, duration=1.0)
    sim.create_jobs(outcome="failed", error_code="extraction_failed")
    async with (
        live_server(build_app(sim)) as url,
        httpx.AsyncClient(base_url=url, headers=auth("docextract")) as client,
    ):
        made = await client.post("/v1/documents", json={
            "document_url": "https://files.example/b.pdf", "extractor_id": "ext_1"})  # fmt: skip
        clock.advance(2)
        answer = (await client.get(f"/v1/documents/{made.json()['id']}")).json()
    assert answer["status"] == "completed"


async def test_the_simulator_s_failure_options_apply_to_submitted_jobs() -> None:
    clock = ManualClock()
    sim = Simulator("docextract", api_key=API_KEY, clock=clock, duration=1.0, fail_rate=0.5,
                    error_code="unsupported_format", seed=3)  # fmt: skip
    async with (
        live_server(build_app(sim)) as url,
        httpx.AsyncClient(base_url=url, headers=auth("docextract")) as client,
    ):
        ids = []
        for n in range(20):
            document = {"document_url": f"https://example.com/{n}.pdf", "extractor_id": "ex_1"}
            answer = await client.post("/v1/documents", json=document)
            ids.append(answer.json()["id"])
        clock.advance(2)
        jobs = [(await client.get(f"/v1/documents/{i}")).json() for i in ids]
    failed = [job for job in jobs if job["status"] == "failed"]
    assert 0 < len(failed) < 20
    assert {job["error_details"]["code"] for job in failed} == {"unsupported_format"}
    assert all(job["status"] == "completed" for job in jobs if job not in failed)


def test_the_simulator_refuses_options_its_provider_does_not_have() -> None:
    with pytest.raises(ConfigError, match="docextract results are inline"):
        Simulator("docextract", api_key=API_KEY, result="url")
    with pytest.raises(ConfigError, match="docextract error codes are"):
        Simulator("docextract", api_key=API_KEY, error_code="DOCUMENT_CORRUPT")
