"""Unstructured, LandingAI ADE and Mistral OCR batches offline, end to end: the official SDK
submits to the simulator, the pipeline registers the job with jobhook (``POST /jobs``), jobhook
polls the same simulator, fetches or assembles the result and hands it to a ``file`` handler
(state, error code, result)."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

import httpx
import pytest
from landingai_ade import LandingAIADE
from mistralai.client import Mistral
from unstructured_client import UnstructuredClient
from unstructured_client.models import operations, shared

from receiver.client.aio import AsyncClient
from receiver.config.load import load_settings
from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.service.runtime import load_handlers
from receiver.sim.landingai import LandingAISim
from receiver.sim.mistral import MistralSim
from receiver.sim.unstructured import UnstructuredSim
from tests.adminsupport import AUTH, TOKEN
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.client.models import JobDetail
    from receiver.completion import Completion, Handler

KEY = "platform-sim-key-0123456789"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def _config(
    tmp_path: Path, provider: str, sim_url: str, *, rpm: float = 600, table: str = ""
) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        f'[results]\nallowed_hosts = ["127.0.0.1"]\nallow_http = true\n'
        "allow_private_networks = true\n"
        f'[sources.{provider}]\nprovider = "{provider}"\n'
        f'api_base_url = "{sim_url}"\napi_key = "env:PLATFORM_KEY"\n{table}'
        f"[sources.{provider}.poll]\ninitial_delay = 0.2\nmax_delay = 1.0\n"
        f"requests_per_minute = {rpm}\n"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return config


async def _delivered(out: Path, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    for _ in range(400):  # at most ~20 s (the poller's first look may wait its idle recheck)
        files = [out / f"{safe_name(job_id)}.json" for job_id in job_ids]
        if all(f.exists() for f in files):
            return {j: json.loads(f.read_text()) for j, f in zip(job_ids, files, strict=True)}
        await asyncio.sleep(0.05)
    raise AssertionError("the jobs were not delivered")


async def _run_jobhook(
    tmp_path: Path, provider: str, sim_url: str, job_ids: list[str], **config: Any
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Serve jobhook, register ``job_ids`` as a pipeline does, wait for the file handler."""
    settings = load_settings(_config(tmp_path, provider, sim_url, **config),
                             environ={"PLATFORM_KEY": KEY})  # fmt: skip
    async with (
        live_server(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
    ):
        for job_id in job_ids:
            tracked = await admin.post("/jobs", json={"source": provider, "job_id": job_id})
            assert tracked.status_code == 200, tracked.text
        files = await _delivered(tmp_path / "out" / provider, job_ids)
        jobs = {j: (await admin.get(f"/jobs/{provider}/{j}")).json()["job"] for j in job_ids}
    return files, jobs


def _result(tmp_path: Path, provider: str, job_id: str) -> Any:
    return json.loads((tmp_path / "out" / provider / f"{safe_name(job_id)}.result").read_text())


def _unstructured_submit(url: str, names: list[str]) -> str:
    files = [shared.InputFiles(content=PDF, file_name=n, content_type="application/pdf")
             for n in names]  # fmt: skip
    body = shared.BodyCreateJob(request_data=json.dumps({"template_id": "hi_res_and_enrichment"}),
                                input_files=files)  # fmt: skip
    # The SDK wraps its client's transport in one whose close() does not reach the pool
    # (split_pdf_hook's DummyTransport): the test closes the transport it gave.
    transport = httpx.HTTPTransport()
    with (
        transport,
        httpx.Client(transport=transport) as http,
        UnstructuredClient(api_key_auth=KEY, server_url=url, client=http) as client,
    ):
        created = client.jobs.create_job(request=operations.CreateJobRequest(body_create_job=body))
    assert created.job_information is not None
    return created.job_information.id


async def test_unstructured_jobs_reach_the_file_handler_with_failed_files_kept(
    tmp_path: Path,
) -> None:
    sim = UnstructuredSim(api_key=KEY, duration=0.5)
    async with live_server(sim.app()) as sim_url:
        whole = await asyncio.to_thread(_unstructured_submit, sim_url, ["a.pdf", "b.pdf"])
        partial = await asyncio.to_thread(_unstructured_submit, sim_url, ["c.pdf", "corrupt.pdf"])
        failed = await asyncio.to_thread(_unstructured_submit, sim_url, ["corrupt-only.pdf"])
        stopped = await asyncio.to_thread(_unstructured_submit, sim_url, ["stop.pdf"])
        late = await asyncio.to_thread(_unstructured_submit, sim_url, ["expired.pdf"])
        ids = [whole, partial, failed, stopped, late]
        files, jobs = await _run_jobhook(tmp_path, "unstructured", sim_url, ids)
    assert [files[j]["state"] for j in ids] == ["succeeded", "partial", "failed", "cancelled",
                                                "succeeded"]  # fmt: skip
    assert [files[j]["provider_status"] for j in ids] == ["COMPLETED", "COMPLETED", "FAILED",
                                                          "STOPPED", "COMPLETED"]  # fmt: skip
    assert files[whole]["error"] is None
    assert files[partial]["error"].startswith("1 file(s) failed: corrupt.pdf: Unable to partition")
    assert jobs[partial]["error_code"] == "files_failed"
    assert files[failed]["error"].startswith("every file failed to partition")
    result = _result(tmp_path, "unstructured", whole)
    assert result["job_id"] == whole
    assert result["failed_files"] == []
    assert [f["elements"][0]["text"] for f in result["files"]] == ["a.pdf", "b.pdf"]
    kept = _result(tmp_path, "unstructured", partial)
    assert [f["elements"][0]["text"] for f in kept["files"]] == ["c.pdf"]
    assert kept["failed_files"] == [
        {"document": "corrupt.pdf", "error": "Unable to partition: the file is corrupted"}
    ]
    assert files[whole]["result"]["bytes"] > 0
    assert files[stopped]["result"] is None
    # A download answered 410 (kept no longer) ends the completion: result_expired, asked once.
    assert (files[late]["state"], files[late]["result"]) == ("succeeded", None)
    assert jobs[late]["error_code"] == "result_expired"
    assert len(sim.hits_to("/download")) == 4


async def test_a_throttled_unstructured_is_asked_again_only_after_retry_after(
    tmp_path: Path,
) -> None:
    # The platform allows 2 requests a second and says Retry-After: 1 past it; jobhook's own
    # budget (600 a minute) would go faster, so it meets 429s and must wait each one out.
    sim = UnstructuredSim(api_key=KEY, duration=0.2, requests_per_minute=2, rate_window=1.0)
    async with live_server(sim.app()) as sim_url:
        job_id = await asyncio.to_thread(_unstructured_submit, sim_url, ["a.pdf", "b.pdf"])
        await asyncio.sleep(1.0)
        sim.hits.clear()
        files, _ = await _run_jobhook(tmp_path, "unstructured", sim_url, [job_id])
    assert files[job_id]["state"] == "succeeded"
    assert len(_result(tmp_path, "unstructured", job_id)["files"]) == 2
    throttled = [i for i, h in enumerate(sim.hits) if h.status == 429]
    assert throttled, "the platform's budget was never met"
    for i in throttled:
        if i + 1 < len(sim.hits):
            assert sim.hits[i + 1].at - sim.hits[i].at >= 0.95, sim.hits


def _mistral_submit(url: str, custom_ids: list[str], metadata: dict[str, str]) -> str:
    lines = b"".join(
        json.dumps({"custom_id": cid, "body": {"document": {
            "type": "document_url", "document_url": f"https://docs.example/{cid}.pdf"}}}).encode()
        + b"\n" for cid in custom_ids
    )  # fmt: skip
    with Mistral(api_key=KEY, server_url=url) as client:
        uploaded = client.files.upload(file={"file_name": "batch.jsonl", "content": lines},
                                       purpose="batch")  # fmt: skip
        job = client.batch.jobs.create(endpoint="/v1/ocr", input_files=[uploaded.id],
                                       model="mistral-ocr-latest", metadata=metadata)  # fmt: skip
    return job.id


async def test_mistral_batches_reach_the_file_handler_with_output_and_errors(
    tmp_path: Path,
) -> None:
    sim = MistralSim(api_key=KEY, duration=0.5)
    async with live_server(sim.app()) as sim_url:
        whole = await asyncio.to_thread(_mistral_submit, sim_url, ["a", "b"], {})
        partial = await asyncio.to_thread(_mistral_submit, sim_url, ["c", "corrupt-d"], {})
        late = await asyncio.to_thread(_mistral_submit, sim_url, ["e", "f"],
                                       {"simulate": "timeout"})  # fmt: skip
        ids = [whole, partial, late]
        files, jobs = await _run_jobhook(tmp_path, "mistral", sim_url, ids)
    assert [files[j]["state"] for j in ids] == ["succeeded", "partial", "failed"]
    assert [jobs[j]["error_code"] for j in ids] == [None, "requests_failed", "TIMEOUT_EXCEEDED"]
    assert files[partial]["error"] == "1 of 2 requests failed"
    result = _result(tmp_path, "mistral", whole)
    assert [line["custom_id"] for line in result["output"]] == ["a", "b"]
    assert result["errors"] == []
    kept = _result(tmp_path, "mistral", partial)
    assert [line["custom_id"] for line in kept["output"]] == ["c"]
    assert kept["errors"][0]["custom_id"] == "corrupt-d"
    assert kept["errors"][0]["error"]["code"] == "3310"
    assert kept["output"][0]["response"]["body"]["pages"][0]["markdown"].startswith("# c")
    # The timed-out batch keeps what it finished.
    assert [line["custom_id"] for line in _result(tmp_path, "mistral", late)["output"]] == ["e"]


def _landingai_submit(url: str, name: str, *, zdr: bool = False) -> str:
    with LandingAIADE(apikey=KEY, base_url=url) as client:
        if zdr:
            saved = "https://bucket.example/ade/"
            job = client.parse_jobs.create(document=(name, PDF), output_save_url=saved)
        else:
            job = client.parse_jobs.create(document=(name, PDF))
    return job.job_id


async def test_landingai_jobs_reach_the_file_handler_inline_by_url_and_failed(
    tmp_path: Path,
) -> None:
    sim = LandingAISim(api_key=KEY, duration=0.5)
    async with live_server(sim.app()) as sim_url:
        sim.public_url = sim_url
        names = ["a.pdf", "large-b.pdf", "torn-c.pdf", "corrupt-d.pdf"]
        ids = [await asyncio.to_thread(_landingai_submit, sim_url, n) for n in names]
        files, jobs = await _run_jobhook(tmp_path, "landingai", sim_url, ids)
    inline, by_url, torn, broken = ids
    assert [files[j]["state"] for j in ids] == ["succeeded", "succeeded", "partial", "failed"]
    assert jobs[torn]["error_code"] == "pages_failed"
    assert files[torn]["error"] == "pages 2 failed to parse"
    assert files[broken]["error"] == "Document could not be processed: the file is corrupted"
    assert _result(tmp_path, "landingai", inline)["markdown"] == "# a.pdf\n"
    assert _result(tmp_path, "landingai", by_url)["markdown"] == "# large-b.pdf\n"


async def test_a_zero_data_retention_result_is_fetched_once_and_the_url_then_refused(
    tmp_path: Path,
) -> None:
    # Under zero data retention the output URL serves once: jobhook marks the result
    # single-use and fetches it exactly once; a second request to the URL is refused.
    sim = LandingAISim(api_key=KEY, duration=0.5)
    async with live_server(sim.app()) as sim_url:
        sim.public_url = sim_url
        job_id = await asyncio.to_thread(_landingai_submit, sim_url, "zdr.pdf", zdr=True)
        table = "[sources.landingai.landingai]\nzero_data_retention = true\n"
        files, _ = await _run_jobhook(tmp_path, "landingai", sim_url, [job_id], table=table)
        async with httpx.AsyncClient() as client:
            again = await client.get(f"{sim_url}/outputs/{sim.jobs[job_id].token}")
    assert files[job_id]["state"] == "succeeded"
    assert _result(tmp_path, "landingai", job_id)["markdown"] == "# zdr.pdf\n"
    assert [h.status for h in sim.hits if h.path.startswith("/outputs/")] == [200, 404]
    assert again.status_code == 404


async def test_a_single_use_result_cut_mid_download_is_result_consumed_and_never_asked_again(
    tmp_path: Path,
) -> None:
    # Under zero data retention the first request deletes the result: a download cut halfway
    # cannot be tried again, and the completion must end with its own error at once.
    sim = LandingAISim(api_key=KEY, duration=0.5, cut_outputs=1)
    async with live_server(sim.app()) as sim_url:
        sim.public_url = sim_url
        job_id = await asyncio.to_thread(_landingai_submit, sim_url, "zdr.pdf", zdr=True)
        table = "[sources.landingai.landingai]\nzero_data_retention = true\n"
        files, jobs = await _run_jobhook(tmp_path, "landingai", sim_url, [job_id], table=table)
    assert files[job_id]["result"] is None
    assert jobs[job_id]["error_code"] == "result_consumed"
    assert len([h for h in sim.hits if h.path.startswith("/outputs/")]) == 1


class _Announcing:
    """The configured file handler, announcing each completion once it has written it, so a
    test waits on that instead of looking at the directory again and again."""

    def __init__(self, inner: Handler) -> None:
        self.name = inner.name
        self._inner = inner
        self.written: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    async def handle(self, completion: Completion) -> None:
        await self._inner.handle(completion)
        self.written[completion.job_id].set()


async def _run_jobhook_v2(
    tmp_path: Path, sim_url: str, job_ids: list[str], table: str
) -> tuple[dict[str, dict[str, Any]], dict[str, JobDetail]]:
    """Serve jobhook with a v2 source, track ``job_ids`` with the typed client as a pipeline
    does, and wait for the file handler to have written each."""
    settings = load_settings(_config(tmp_path, "landingai", sim_url, table=table),
                             environ={"PLATFORM_KEY": KEY})  # fmt: skip
    files = _Announcing(load_handlers(settings)["files"])
    async with (
        live_server(create_app(settings, handlers={"files": files})) as url,
        AsyncClient(url, TOKEN) as jobhook,
    ):
        for job_id in job_ids:
            await jobhook.track("landingai", job_id)
        async with asyncio.timeout(20):
            for job_id in job_ids:
                await files.written[job_id].wait()
        jobs = {job_id: await jobhook.get("landingai", job_id) for job_id in job_ids}
    out = tmp_path / "out" / "landingai"
    written = {j: json.loads((out / f"{safe_name(j)}.json").read_text()) for j in job_ids}
    return written, jobs


def _v2_parse(url: str, name: str, **options: Any) -> str:
    with LandingAIADE(apikey=KEY, base_url=url, v2_base_url=url) as client:
        return client.v2.parse_jobs.create(document=(name, PDF), **options).job_id


V2 = '[sources.landingai.landingai]\napi_version = "v2"\n'


@pytest.mark.parametrize("envelope", ["result", "data"])
async def test_landingai_v2_parse_jobs_reach_the_file_handler_partial_failed_and_cancelled(
    tmp_path: Path, envelope: Literal["result", "data"]
) -> None:
    sim = LandingAISim(api_key=KEY, duration=0.3, envelope=envelope)
    async with live_server(sim.app()) as sim_url:
        sim.public_url = sim_url
        names = ["a.pdf", "torn-b.pdf", "corrupt-c.pdf", "stop-d.pdf"]
        ids = [await asyncio.to_thread(_v2_parse, sim_url, n) for n in names]
        files, jobs = await _run_jobhook_v2(tmp_path, sim_url, ids, V2)
    whole, torn, broken, stopped = ids
    assert [files[j]["state"] for j in ids] == ["succeeded", "partial", "failed", "cancelled"]
    assert (files[torn]["error"], jobs[torn].job.error_code) == (
        "pages 2, 3 failed to parse",
        "pages_failed",
    )
    reason = "Document could not be processed: the file is corrupted"
    if envelope == "result":
        assert (files[broken]["error"], jobs[broken].job.error_code) == (
            f"document_corrupted: {reason}",
            "document_corrupted",
        )
        assert jobs[stopped].job.error_code == "job_cancelled"
    else:  # the older envelope: failure_reason, no code
        assert files[broken]["error"] == reason
    assert _result(tmp_path, "landingai", whole)["markdown"] == "# a.pdf\n"
    assert _result(tmp_path, "landingai", torn)["metadata"]["failed_pages"] == [2, 3]
    # Polled at the v2 paths only.
    assert {h.path.rsplit("/", 1)[0] for h in sim.hits if h.method == "GET"} == {"/v2/parse/jobs"}


async def test_landingai_v2_zero_data_retention_output_url_is_fetched_once(
    tmp_path: Path,
) -> None:
    sim = LandingAISim(api_key=KEY, duration=0.3)
    async with live_server(sim.app()) as sim_url:
        sim.public_url = sim_url
        saved = {"output_save_url": "https://bucket.example/ade/"}
        job_id = await asyncio.to_thread(_v2_parse, sim_url, "torn-zdr.pdf", **saved)
        table = V2 + "zero_data_retention = true\n"
        files, jobs = await _run_jobhook_v2(tmp_path, sim_url, [job_id], table)
        async with httpx.AsyncClient() as client:
            again = await client.get(f"{sim_url}/outputs/{sim.jobs[job_id].token}")
    # The receipt at the top of the envelope names the failed pages; the result is fetched.
    assert (files[job_id]["state"], jobs[job_id].job.error_code) == ("partial", "pages_failed")
    assert _result(tmp_path, "landingai", job_id)["markdown"] == "# torn-zdr.pdf\n"
    # jobhook's one fetch, then the test's own request, refused.
    assert [h.status for h in sim.hits if h.path.startswith("/outputs/")] == [200, 404]
    assert again.status_code == 404


async def test_landingai_v2_extract_jobs_reach_the_file_handler(tmp_path: Path) -> None:
    sim = LandingAISim(api_key=KEY, duration=0.3)
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}

    def submit(url: str) -> str:
        with LandingAIADE(apikey=KEY, base_url=url, v2_base_url=url) as client:
            return client.v2.extract_jobs.create(markdown="# total 3", schema=schema).job_id

    async with live_server(sim.app()) as sim_url:
        job_id = await asyncio.to_thread(submit, sim_url)
        table = V2 + 'jobs = "extract"\n'
        files, _ = await _run_jobhook_v2(tmp_path, sim_url, [job_id], table)
    assert files[job_id]["state"] == "succeeded"
    result = _result(tmp_path, "landingai", job_id)
    assert (result["extraction"], result["markdown"]) == ({"total": "simulated total"}, "# total 3")
