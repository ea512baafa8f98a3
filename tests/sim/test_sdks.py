"""The providers' official SDKs against ``jobhook simulate``, as a user's code would call them.

reductoai 0.25.0 and knowhere-python-sdk 2.2.1 are generated from the providers' current APIs:
every answer must parse in their own models (Reducto's client validates strictly here).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from knowhere import AsyncKnowhere
from knowhere.lib.result_parser import parseResultZip
from reducto import AsyncReducto, BadRequestError
from svix.webhooks import Webhook

from receiver.sim import Simulator, build_app
from tests.sim.helpers import API_KEY, Recorder, wait_for
from tests.support import SECRET, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

DOC = "https://example.com/invoice.pdf"
SPLIT = [{"name": "invoice", "description": "the invoice pages"}]


def _reducto(url: str, *, strict: bool = True) -> AsyncReducto:
    return AsyncReducto(api_key=API_KEY, base_url=url, max_retries=0,
                        _strict_response_validation=strict)  # fmt: skip


@pytest.fixture
async def hooks() -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder()
    async with live_server(recorder.app) as url:
        yield recorder, f"{url}/hook"


def _bodies(recorder: Recorder) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in recorder.received]


@pytest.mark.parametrize(
    ("method", "extra", "response_type"),
    [("parse", {}, "parse"), ("extract", {"instructions": {"schema": {}}}, "extract"),
     ("split", {"split_description": SPLIT}, "split"),
     ("pipeline", {"pipeline_id": "pl_1"}, "pipeline")],
)  # fmt: skip
async def test_reducto_run_job_with_a_svix_webhook_and_metadata(
    hooks: tuple[Recorder, str], method: str, extra: dict[str, Any], response_type: str
) -> None:
    recorder, hook_url = hooks
    sim = Simulator("reducto", api_key=API_KEY, duration=0.3, secret=SECRET,
                    webhook_url=hook_url)  # fmt: skip
    async with live_server(build_app(sim)) as url, _reducto(url) as client:
        asked = {"webhook": {"mode": "svix"}, "metadata": {"order": 7}}
        submitted = await getattr(client, method).run_job(input=DOC, async_=asked, **extra)
        await wait_for(lambda: any(b["status"] == "Completed" for b in _bodies(recorder)))
        job = await client.job.get(submitted.job_id)
    assert job.status == "Completed"
    assert job.result is not None
    assert job.result.response_type == response_type
    final = [b for b in _bodies(recorder) if b["status"] == "Completed"]
    assert final == [{"status": "Completed", "job_id": submitted.job_id, "metadata": {"order": 7}}]
    received = recorder.received[-1]
    Webhook(SECRET).verify(received.body, received.headers)  # Svix-signed


async def test_reducto_direct_webhook_is_unsigned_and_goes_to_the_submitted_url(
    hooks: tuple[Recorder, str],
) -> None:
    recorder, hook_url = hooks
    sim = Simulator("reducto", api_key=API_KEY, duration=0.2)  # no secret: direct needs none
    async with live_server(build_app(sim)) as url, _reducto(url) as client:
        asked = {"webhook": {"mode": "direct", "url": hook_url}, "metadata": {"k": "v"}}
        submitted = await client.parse.run_job(input=DOC, async_=asked)
        await wait_for(lambda: any(b["status"] == "Completed" for b in _bodies(recorder)))
    assert _bodies(recorder)[-1] == {"status": "Completed", "job_id": submitted.job_id,
                                     "metadata": {"k": "v"}}  # fmt: skip
    assert not any(k.startswith(("svix-", "webhook-")) for k in recorder.received[-1].headers)


async def test_reducto_direct_webhook_is_retried_three_times() -> None:
    recorder = Recorder(script=[500] * 100)
    async with live_server(recorder.app) as hook:
        sim = Simulator("reducto", api_key=API_KEY, duration=0.0, retry_delays=(0.01,))
        async with live_server(build_app(sim)) as url, _reducto(url) as client:
            asked = {"webhook": {"mode": "direct", "url": f"{hook}/hook"}}
            await client.parse.run_job(input=DOC, async_=asked)
            await wait_for(lambda: sim.deliveries and all(d.state == "failed"
                                                          for d in sim.deliveries))  # fmt: skip
    assert {len(d.attempts) for d in sim.deliveries} == {4}  # the first try and 3 retries


async def test_reducto_failed_job_has_the_sdks_error_object() -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=0.0)
    async with live_server(build_app(sim)) as url, _reducto(url) as client:
        (job_id,) = sim.create_jobs(1, outcome="failed", error_code="DOCUMENT_CORRUPT")
        job = await client.job.get(job_id)
    assert job.status == "Failed"
    assert job.error is not None
    assert (job.error.name, job.error.code) == ("DOCUMENT_CORRUPT", 422)
    assert job.reason == job.error.message


async def test_reducto_get_all_pages_and_cancel() -> None:
    sim = Simulator("reducto", api_key=API_KEY, duration=60.0)
    async with (
        live_server(build_app(sim)) as url,
        _reducto(url) as client,
        _reducto(url, strict=False) as lenient,  # the SDK's job.get model lacks "Cancelled"
    ):
        ids = [(await client.parse.run_job(input=DOC)).job_id for _ in range(5)]
        seen: list[str] = []
        cursor = None
        while True:
            page = await client.job.get_all(limit=2, cursor=cursor)
            seen += [job.job_id for job in page.jobs]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        await client.job.cancel(ids[0])
        cancelled = await lenient.job.get(ids[0])
        with pytest.raises(BadRequestError):
            await client.job.cancel(ids[0])  # already finished
    assert sorted(seen) == sorted(ids)
    assert cancelled.status == "Cancelled"
    assert sim.status(ids[1]) == "Pending"


async def test_reducto_submission_without_input_is_refused_with_400() -> None:
    sim = Simulator("reducto", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/parse_async", json={"async": {}},
                                     headers={"Authorization": f"Bearer {API_KEY}"})  # fmt: skip
    assert response.status_code == 400


async def test_knowhere_create_wait_load_with_a_signed_webhook(
    hooks: tuple[Recorder, str],
) -> None:
    recorder, hook_url = hooks
    sim = Simulator("knowhere", api_key=API_KEY, duration=0.3, secret=SECRET,
                    result_bytes=4096)  # fmt: skip
    async with (
        live_server(build_app(sim)) as url,
        AsyncKnowhere(api_key=API_KEY, base_url=url, max_retries=0) as client,
    ):
        job = await client.jobs.create(source_type="url", source_url=DOC, data_id="order-7",
                                       webhook={"url": hook_url})  # fmt: skip
        done = await client.jobs.wait(job.job_id, poll_interval=0.05, poll_timeout=10)
        result = await client.jobs.load(done)
        async with httpx.AsyncClient(base_url=url) as plain:
            raw = await plain.get(f"/v2/jobs/{job.job_id}",
                                  headers={"Authorization": f"Bearer {API_KEY}"})  # fmt: skip
        await wait_for(lambda: bool(recorder.received))
    assert (job.status, job.source_type, job.data_id) == ("waiting-file", "url", "order-7")
    assert done.is_done
    assert done.result_url is not None
    assert result.manifest.files is not None
    assert result.full_markdown.startswith("# Simulated result")
    assert [c.content for c in result.chunks] == ["Simulated result"]
    # The job answer's checksum, checked by the SDK's own verifier.
    parseResultZip(result.raw_zip, expected_checksum=raw.json()["result_checksum"]["value"])
    received = recorder.received[0]
    Webhook(SECRET).verify(received.body, received.headers)
    assert json.loads(received.body)["job_id"] == job.job_id


async def test_knowhere_failed_job_raises_the_sdks_job_failed_error_with_its_code() -> None:
    from knowhere import JobFailedError

    sim = Simulator("knowhere", api_key=API_KEY, duration=0.0)
    async with (
        live_server(build_app(sim)) as url,
        AsyncKnowhere(api_key=API_KEY, base_url=url, max_retries=0) as client,
    ):
        (job_id,) = sim.create_jobs(1, outcome="failed", error_code="PARSE_ERROR")
        with pytest.raises(JobFailedError) as info:
            await client.jobs.wait(job_id, poll_interval=0.05, poll_timeout=5)
        job = await client.jobs.get(job_id)
    assert info.value.code == "PARSE_ERROR"
    assert job.error is not None
    assert (job.error.code, job.error.request_id) == ("PARSE_ERROR", "req_0")


async def test_knowhere_webhook_submission_needs_a_secret_to_sign_with() -> None:
    sim = Simulator("knowhere", api_key=API_KEY)
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v2/jobs",
            json={"source_type": "url", "source_url": DOC, "webhook": {"url": "http://x/h"}},
            headers={"Authorization": f"Bearer {API_KEY}"},
        )
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("provider", "body", "read_id"),
    [("docurift", {"url": DOC, "metadata": {"order": 7}}, lambda b: b["data"]["documentId"]),
     ("docextract", {"document_url": DOC, "extractor_id": "ext_1", "metadata": {"order": 7}},
      lambda b: b["id"])],
)  # fmt: skip
async def test_docurift_and_docextract_submissions_send_their_webhook_to_the_named_url(
    hooks: tuple[Recorder, str], provider: str, body: dict[str, Any], read_id: Any
) -> None:
    recorder, hook_url = hooks
    key = "webhookUrl" if provider == "docurift" else "webhook_url"
    sim = Simulator(provider, api_key=API_KEY, duration=0.2, secret=SECRET,
                    native_secret="native-secret-0123456789")  # fmt: skip
    headers = {"X-API-Key": API_KEY} if provider == "docurift" else {
        "Authorization": f"Bearer {API_KEY}"}  # fmt: skip
    async with live_server(build_app(sim)) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/v1/documents", json={**body, key: hook_url},
                                     headers=headers)  # fmt: skip
        await wait_for(lambda: bool(recorder.received))
    assert response.status_code == 201
    job_id = read_id(response.json())
    received = recorder.received[0]
    Webhook(SECRET).verify(received.body, received.headers)
    assert job_id in received.body.decode()
    if provider == "docurift":
        assert json.loads(received.body)["data"]["metadata"] == {"order": 7}
    assert sim.job_view(job_id)["metadata"] == {"order": 7}  # type: ignore[index]
