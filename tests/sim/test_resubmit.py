"""The DocExtract simulator takes a failed document back as its API does (``POST
/v1/documents`` with the ``document_url`` and ``extractor_id`` its failed job shows), and the
new job's fate is deterministic: a transient failure does not repeat, the document's own does."""

from __future__ import annotations

import httpx
import pytest

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
