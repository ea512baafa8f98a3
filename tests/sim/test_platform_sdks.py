"""The polled platforms' official SDKs against their simulators: every answer must parse in the
SDK's own models, and refusals arrive as the SDK's own errors."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import landingai_ade
import pytest
from landingai_ade import LandingAIADE
from landingai_ade.types.v2 import JobStatus, V2ExtractResult, V2ParseResponse
from mistralai.client import Mistral
from mistralai.client import errors as mistral_errors
from unstructured_client import UnstructuredClient
from unstructured_client.models import errors as unstructured_errors
from unstructured_client.models import operations, shared

from receiver.sim import ManualClock
from receiver.sim.landingai import LandingAISim
from receiver.sim.mistral import MistralSim
from receiver.sim.unstructured import UnstructuredSim
from tests.support import live_server

KEY = "platform-sim-key-0123456789"


def _unstructured(url: str, key: str = KEY) -> tuple[httpx.HTTPTransport, UnstructuredClient]:
    # The SDK's split_pdf_hook wraps the transport so that close() misses the pool: the caller
    # closes the transport it gave.
    transport = httpx.HTTPTransport()
    client = UnstructuredClient(api_key_auth=key, server_url=url,
                                client=httpx.Client(transport=transport))  # fmt: skip
    return transport, client


async def test_unstructured_sdk_reads_jobs_details_failed_files_and_downloads() -> None:
    sim = UnstructuredSim(api_key=KEY, duration=0.2)

    def run(url: str) -> None:
        transport, client = _unstructured(url)
        with transport, client:
            files = [shared.InputFiles(content=b"%PDF-1.7", file_name=n) for n in ("a.pdf",
                     "corrupt.pdf")]  # fmt: skip
            body = shared.BodyCreateJob(request_data="{}", input_files=files)
            created = client.jobs.create_job(
                request=operations.CreateJobRequest(body_create_job=body)
            ).job_information
            assert created is not None
            assert created.status == shared.JobStatus.SCHEDULED
            time.sleep(0.3)
            job = client.jobs.get_job(request={"job_id": created.id}).job_information
            assert job is not None
            assert job.status == shared.JobStatus.COMPLETED
            assert job.output_node_files
            details = client.jobs.get_job_details(request={"job_id": created.id}).job_details
            assert details is not None
            assert details.processing_status == shared.JobProcessingStatus.COMPLETED_WITH_ERRORS
            failed = client.jobs.get_job_failed_files(request={"job_id": created.id})
            assert failed.job_failed_files is not None
            assert [f.document for f in failed.job_failed_files.failed_files] == ["corrupt.pdf"]
            out = client.jobs.download_job_output(
                request={"job_id": created.id, "file_id": job.output_node_files[0].file_id}
            )
            assert out.any[0]["metadata"]["filename"] == "a.pdf"
            listed = client.jobs.list_jobs(request={"status": "COMPLETED"}).response_list_jobs
            assert [j.id for j in listed or []] == [created.id]

    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)


async def test_unstructured_refusals_are_the_sdks_errors_401_429_and_410() -> None:
    sim = UnstructuredSim(api_key=KEY, duration=0.0, retention=0.0, requests_per_minute=3)

    def run(url: str) -> None:
        transport, client = _unstructured(url, key="wrong-key-0123456789")
        with transport, client, pytest.raises(unstructured_errors.SDKError) as refused:
            client.jobs.list_jobs(request={})
        assert refused.value.status_code == 401
        transport, client = _unstructured(url)
        with transport, client:
            body = shared.BodyCreateJob(request_data="{}", input_files=[
                shared.InputFiles(content=b"%PDF", file_name="a.pdf")])  # fmt: skip
            job = client.jobs.create_job(request={"body_create_job": body}).job_information
            assert job is not None
            time.sleep(0.05)
            info = client.jobs.get_job(request={"job_id": job.id}).job_information
            assert info is not None
            assert info.output_node_files
            file_id = info.output_node_files[0].file_id
            with pytest.raises(unstructured_errors.SDKError) as expired:
                client.jobs.download_job_output(request={"job_id": job.id, "file_id": file_id},
                                                retries=None)  # fmt: skip
            assert expired.value.status_code == 410
            with pytest.raises(unstructured_errors.SDKError) as throttled:
                client.jobs.get_job(request={"job_id": job.id})
            assert throttled.value.status_code == 429
            assert int(throttled.value.raw_response.headers["Retry-After"]) >= 1

    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)


async def test_mistral_sdk_uploads_runs_a_batch_and_downloads_its_files() -> None:
    sim = MistralSim(api_key=KEY, duration=0.2)

    def run(url: str) -> None:
        with Mistral(api_key=KEY, server_url=url) as client:
            lines = b"".join(json.dumps({"custom_id": c, "body": {"document": {
                "type": "document_url", "document_url": f"https://d.example/{c}.pdf"}}}).encode()
                + b"\n" for c in ("a", "corrupt"))  # fmt: skip
            uploaded = client.files.upload(file={"file_name": "in.jsonl", "content": lines},
                                           purpose="batch")  # fmt: skip
            assert uploaded.num_lines == 2
            job = client.batch.jobs.create(endpoint="/v1/ocr", input_files=[uploaded.id],
                                           model="mistral-ocr-latest")  # fmt: skip
            assert job.status == "QUEUED"
            time.sleep(0.3)
            job = client.batch.jobs.get(job_id=job.id)
            assert (job.status, job.succeeded_requests, job.failed_requests) == ("SUCCESS", 1, 1)
            assert job.output_file is not None
            assert job.error_file is not None
            output = client.files.download(file_id=job.output_file).read().splitlines()
            errors = client.files.download(file_id=job.error_file).read().splitlines()
            assert json.loads(output[0])["response"]["status_code"] == 200
            assert json.loads(errors[0])["error"]["code"] == "3310"
            with pytest.raises(mistral_errors.SDKError) as missing:
                client.batch.jobs.get(job_id="no-such-batch")
            assert missing.value.status_code == 404

    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)


async def test_landingai_sdk_parses_and_extracts_and_a_zdr_url_serves_once() -> None:
    sim = LandingAISim(api_key=KEY, duration=0.2)

    def run(url: str) -> None:
        with LandingAIADE(apikey=KEY, base_url=url, max_retries=0) as client, httpx.Client() as h:
            parse = client.parse_jobs.create(document=("a.pdf", b"%PDF"))
            zdr = client.parse_jobs.create(
                document_url="https://d.example/z.pdf",
                output_save_url="https://bucket.example/out/",
            )
            extract = client.extract_jobs.create(markdown="# total 3", schema=json.dumps(
                {"type": "object", "properties": {"total": {"type": "number"}}}))  # fmt: skip
            assert client.parse_jobs.get(parse.job_id).status in ("pending", "processing")
            time.sleep(0.3)
            done = client.parse_jobs.get(parse.job_id)
            assert done.status == "completed"
            assert done.data is not None
            assert done.data.markdown == "# a.pdf\n"
            got = client.extract_jobs.get(extract.job_id)
            assert got.data is not None
            assert got.data.extraction == {"total": "simulated total"}
            held = client.parse_jobs.get(zdr.job_id)
            assert held.data is None
            assert held.output_url is not None
            assert h.get(held.output_url).status_code == 200
            assert h.get(held.output_url).status_code == 404
            assert client.parse_jobs.get(zdr.job_id).output_url is None
        with (
            LandingAIADE(apikey="wrong-key-0123", base_url=url) as stranger,
            pytest.raises(landingai_ade.AuthenticationError),
        ):
            stranger.parse_jobs.get("any")

    async with live_server(sim.app()) as url:
        sim.public_url = url
        await asyncio.to_thread(run, url)


def _v2_client(url: str, key: str = KEY) -> LandingAIADE:
    return LandingAIADE(apikey=key, base_url=url, v2_base_url=url, max_retries=0)


async def test_landingai_sdk_v2_parse_and_extract_jobs_read_as_its_models() -> None:
    clock = ManualClock()
    sim = LandingAISim(api_key=KEY, duration=10.0, clock=clock.time)
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}

    def run(url: str) -> None:
        with _v2_client(url) as client:
            parse = client.v2.parse_jobs.create(document=("a.pdf", b"%PDF"), model="dpt-2-latest")
            torn = client.v2.parse_jobs.create(document=("torn.pdf", b"%PDF"))
            extract = client.v2.extract_jobs.create(markdown="# total 3", schema=schema)
            assert parse.status is JobStatus.PENDING
            assert client.v2.parse_jobs.get(parse.job_id).status is JobStatus.PENDING
            clock.advance(5.0)
            assert client.v2.parse_jobs.get(parse.job_id).status is JobStatus.PROCESSING
            clock.advance(5.0)
            done = client.v2.parse_jobs.get(parse.job_id)
            assert (done.status, done.error, done.metadata) == (JobStatus.COMPLETED, None, None)
            parsed = V2ParseResponse.model_validate(done.raw["result"])
            assert parsed.markdown == "# a.pdf\n"
            assert parsed.metadata is not None
            assert parsed.metadata.failed_pages == []
            partial = V2ParseResponse.model_validate(
                client.v2.parse_jobs.get(torn.job_id).raw["result"]
            )
            assert partial.metadata is not None
            assert partial.metadata.failed_pages == [2, 3]
            assert partial.structure is not None
            assert [p.status for p in partial.structure.children] == ["ok", "failed", "failed"]
            got = client.v2.extract_jobs.get(extract.job_id)
            extracted = V2ExtractResult.model_validate(got.raw["result"])
            assert (extracted.extraction, extracted.markdown) == (
                {"total": "simulated total"},
                "# total 3",
            )
            listed = client.v2.parse_jobs.list(page_size=1, status="completed")
            assert ([j.job_id for j in listed], listed.has_more) == ([torn.job_id], True)
            assert client.v2.parse_jobs.wait(parse.job_id).is_terminal

    async with live_server(sim.app()) as url:
        sim.public_url = url
        await asyncio.to_thread(run, url)


async def test_landingai_sdk_v2_failed_cancelled_and_the_older_envelope() -> None:
    clock = ManualClock()
    sim = LandingAISim(api_key=KEY, duration=1.0, clock=clock.time)

    def run(url: str) -> None:
        with _v2_client(url) as client:
            broken = client.v2.parse_jobs.create(document=("corrupt.pdf", b"%PDF"))
            stopped = client.v2.extract_jobs.create(markdown="# stop", schema={"type": "object"})
            clock.advance(1.0)
            failed = client.v2.parse_jobs.get(broken.job_id)
            assert failed.status is JobStatus.FAILED
            assert failed.error is not None
            assert failed.error.code == "document_corrupted"
            cancelled = client.v2.extract_jobs.get(stopped.job_id)
            assert cancelled.status is JobStatus.CANCELLED
            assert cancelled.error is not None
            assert cancelled.error.code == "job_cancelled"
            sim.envelope = "data"
            older = client.v2.parse_jobs.get(broken.job_id)
            assert "data" in older.raw
            assert "error" not in older.raw
            assert older.error is not None
            assert (older.error.code, older.error.message) == (
                None,
                "Document could not be processed: the file is corrupted",
            )

    async with live_server(sim.app()) as url:
        await asyncio.to_thread(run, url)


async def test_landingai_sdk_v2_output_url_serves_once_and_ids_stay_with_their_version() -> None:
    clock = ManualClock()
    sim = LandingAISim(api_key=KEY, duration=1.0, clock=clock.time)

    def run(url: str) -> None:
        with _v2_client(url) as client, httpx.Client() as h:
            zdr = client.v2.parse_jobs.create(
                document_url="https://d.example/z.pdf", output_save_url="https://bucket.example/o"
            )
            v1 = client.parse_jobs.create(document=("a.pdf", b"%PDF"))
            clock.advance(1.0)
            held = client.v2.parse_jobs.get(zdr.job_id)
            assert held.result is None
            assert held.metadata is not None
            assert held.metadata["page_count"] == 3
            output_url = held.raw["output_url"]
            assert isinstance(output_url, str)
            first = h.get(output_url)
            assert first.status_code == 200
            assert V2ParseResponse.model_validate(first.json()).markdown == "# z.pdf\n"
            assert h.get(output_url).status_code == 404
            assert client.v2.parse_jobs.get(zdr.job_id).raw["output_url"] is None
            with pytest.raises(landingai_ade.NotFoundError):
                client.v2.parse_jobs.get(v1.job_id)
            with pytest.raises(landingai_ade.NotFoundError):
                client.parse_jobs.get(zdr.job_id)
            with pytest.raises(landingai_ade.UnprocessableEntityError):
                # What the SDK itself refuses to send, sent as the raw body.
                client.v2.extract_jobs.create(markdown="# x", schema={}, extra_body={"schema": [1]})
        with (
            _v2_client(url, "wrong-key-0123") as stranger,
            pytest.raises(landingai_ade.AuthenticationError),
        ):
            stranger.v2.parse_jobs.get(zdr.job_id)

    async with live_server(sim.app()) as url:
        sim.public_url = url
        await asyncio.to_thread(run, url)
