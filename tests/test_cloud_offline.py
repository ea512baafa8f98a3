"""The clouds offline, end to end: the official SDK submits to the simulator, the pipeline
registers the operation with jobhook (``POST /jobs``), jobhook polls the same simulator within
its budget and Retry-After, assembles the result and hands it to a ``file`` handler.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.core.credentials import AzureKeyCredential
from google.cloud import documentai_v1 as documentai
from google.cloud import storage
from google.oauth2 import service_account

from receiver.config.load import load_settings
from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.sim.azure import AzureDocIntelSim
from receiver.sim.google import DocumentAISim
from tests.adminsupport import AUTH, TOKEN
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from pathlib import Path

AZ_KEY = "az-sim-key-0123456789"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def _azure_config(tmp_path: Path, sim_url: str, rpm: float) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "data" / "jobhook.db"}"\n'
        '[sources.az]\nprovider = "azure-docintel"\n'
        f'api_base_url = "{sim_url}"\napi_key = "env:AZURE_DOCINTEL_KEY"\n'
        '[sources.az.azure]\nmodel_id = "prebuilt-invoice"\n'
        f"[sources.az.poll]\ninitial_delay = 0.1\nmax_delay = 1.0\nrequests_per_minute = {rpm}\n"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return config


def _submit(sim_url: str, document: bytes) -> str:
    """What a pipeline does: submit with the SDK, without waiting; the operation's result id."""
    with DocumentIntelligenceClient(sim_url, AzureKeyCredential(AZ_KEY)) as client:
        poller = client.begin_analyze_document("prebuilt-invoice", document, polling=False)
        result_id: str = poller.details["operation_id"]
        return result_id


async def _delivered(out: Path, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    for _ in range(300):  # at most ~15 s
        files = [out / f"{safe_name(job_id)}.json" for job_id in job_ids]
        if all(f.exists() for f in files):
            return {j: json.loads(f.read_text()) for j, f in zip(job_ids, files, strict=True)}
        await asyncio.sleep(0.05)
    raise AssertionError("the operations were not delivered")


async def test_azure_operations_are_polled_assembled_and_filed(tmp_path: Path) -> None:
    sim = AzureDocIntelSim(api_key=AZ_KEY, duration=2.0, retry_after=0.6)
    async with live_server(sim.app()) as sim_url:
        settings = load_settings(_azure_config(tmp_path, sim_url, 600),
                                 environ={"AZURE_DOCINTEL_KEY": AZ_KEY})  # fmt: skip
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            good = await asyncio.to_thread(_submit, sim_url, PDF)
            broken = await asyncio.to_thread(_submit, sim_url, PDF[:-7])  # truncated: fails
            # What users paste: the bare result id (the source names the model), or the URL.
            tracked = await admin.post("/jobs", json={"source": "az", "job_id": good})
            location = (f"{sim_url}/documentintelligence/documentModels/prebuilt-invoice/"
                        f"analyzeResults/{broken}?api-version=2024-11-30")  # fmt: skip
            tracked_url = await admin.post("/jobs", json={"source": "az", "job_id": location})
            refused = await admin.post("/jobs", json={"source": "az", "job_id": "a/b:c"})
            ids = [f"prebuilt-invoice:{good}", f"prebuilt-invoice:{broken}"]
            files = await _delivered(tmp_path / "out" / "az", ids)
            by_bare_id = (await admin.get(f"/jobs/az/{good}")).json()
            failed = (await admin.get(f"/jobs/az/{ids[1]}")).json()
    assert tracked.status_code == tracked_url.status_code == 200
    assert tracked.json()["job"]["job_id"] == ids[0]
    assert tracked_url.json()["job"]["job_id"] == ids[1]
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_job_id"

    done, bad = files[ids[0]], files[ids[1]]
    assert (done["state"], done["provider_status"], done["error"]) == ("succeeded", "succeeded",
                                                                      None)  # fmt: skip
    assert (bad["state"], bad["result"], bad["error_code"]) == ("failed", None, "InvalidContent")
    assert bad["error"].startswith("InvalidRequest: Invalid request. (InvalidContent:")
    assert failed["job"]["error_code"] == "InvalidContent"
    # The file handler's completion shows each field's confidence, as the job does.
    assert done["fields"] == {
        "VendorName": 0.952, "InvoiceId": 0.981, "InvoiceDate": 0.934, "InvoiceTotal": 0.713,
    }  # fmt: skip
    result = json.loads((tmp_path / "out" / "az" / f"{safe_name(ids[0])}.result").read_text())
    assert result["modelId"] == "prebuilt-invoice"
    assert by_bare_id["job"]["job_id"] == ids[0]
    assert by_bare_id["job"]["fields"] == {
        "VendorName": 0.952, "InvoiceId": 0.981, "InvoiceDate": 0.934, "InvoiceTotal": 0.713,
    }  # fmt: skip
    # No operation was polled sooner than the Retry-After its previous answer carried.
    for result_id in (good, broken):
        polls = sim.polls_of(result_id)
        assert len(polls) >= 2
        assert all(b.at - a.at >= 0.6 for a, b in itertools.pairwise(polls))


async def test_a_throttled_azure_is_never_asked_faster_than_its_budget_or_retry_after(
    tmp_path: Path,
) -> None:
    # The service allows 2 requests a second; jobhook's budget (120 a minute) is 2 too, with
    # no margin for the pipeline's own submissions: some polls get 429 and Retry-After 1.
    sim = AzureDocIntelSim(api_key=AZ_KEY, duration=3.0, retry_after=0.1, requests_per_second=2)
    async with live_server(sim.app()) as sim_url:
        result_ids = [await asyncio.to_thread(_submit, sim_url, PDF) for _ in range(3)]
        sim.hits.clear()
        settings = load_settings(_azure_config(tmp_path, sim_url, 120),
                                 environ={"AZURE_DOCINTEL_KEY": AZ_KEY})  # fmt: skip
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            for result_id in result_ids:
                await admin.post("/jobs", json={"source": "az", "job_id": result_id})
            # The pipeline keeps submitting meanwhile, through the same per-second limit.
            await asyncio.sleep(0.3)
            more = [await asyncio.to_thread(_submit_or_429, sim_url) for _ in range(3)]
            await _delivered(tmp_path / "out" / "az",
                             [f"prebuilt-invoice:{r}" for r in result_ids])  # fmt: skip
    polls = [h for h in sim.hits if h.method == "GET"]
    # Each operation polled at least once (on a busy machine the first poll of each may already
    # find it done: the spacing below is what this test is about).
    assert len(polls) >= len(result_ids)
    # The simulator stamps each request when it is served, so on a busy machine two requests
    # sent 0.5 s apart can be stamped closer: 0.1 s of that is scheduling, not jobhook.
    # jobhook's own requests: at least 60/120 s apart (its budget) ...
    assert all(b.at - a.at >= 0.4 for a, b in itertools.pairwise(polls))
    # ... and none sooner than 1 s after a 429 it was given.
    for a, b in itertools.pairwise(polls):
        if a.status == 429:
            assert b.at - a.at >= 0.9
    assert 429 in [h.status for h in sim.hits] or 429 in more


def _submit_or_429(sim_url: str) -> int:
    answer = httpx.post(
        f"{sim_url}/documentintelligence/documentModels/prebuilt-read:analyze",
        params={"api-version": "2024-11-30"},
        headers={"Ocp-Apim-Subscription-Key": AZ_KEY, "Content-Type": "application/pdf"},
        content=PDF,
    )
    return answer.status_code


def _google_config(tmp_path: Path, sim_url: str, key: Path) -> Path:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "data" / "jobhook.db"}"\n'
        f'[sources.g]\nprovider = "google-docai"\napi_base_url = "{sim_url}"\n'
        f'[sources.g.gcp]\ncredentials = "file:{key}"\nstorage_url = "{sim_url}"\n'
        "[sources.g.poll]\ninitial_delay = 0.2\nmax_delay = 1.0\n"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return config


def _batch(sim: DocumentAISim, sim_url: str, *uris: str) -> str:
    """What a pipeline does: upload, submit the batch with the SDK; the operation's name."""
    storage.Client(project="sim-project").bucket("in").blob("a.pdf").upload_from_string(
        PDF, content_type="application/pdf"
    )
    creds = service_account.Credentials.from_service_account_info(
        sim.service_account_key(), scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    client = documentai.DocumentProcessorServiceClient(
        transport="rest", credentials=creds, client_options={"api_endpoint": sim_url}
    )
    gcs = [documentai.GcsDocument(gcs_uri=u, mime_type="application/pdf") for u in uris]
    operation = client.batch_process_documents(request=documentai.BatchProcessRequest(
        name="projects/sim-project/locations/us/processors/invoice-1",
        input_documents={"gcs_documents": {"documents": gcs}},
        document_output_config={"gcs_output_config": {"gcs_uri": "gs://out/results/"}},
    ))  # fmt: skip
    name: str = operation.operation.name
    return name


async def test_a_google_batch_is_polled_its_shards_assembled_and_a_failed_input_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    sim_url = f"http://127.0.0.1:{port}"
    sim = DocumentAISim(public_url=sim_url, duration=1.0)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", sim_url)
    key = tmp_path / "docai-key.json"
    key.write_text(json.dumps(sim.service_account_key()))
    async with live_server(sim.app(), port=port):
        name = await asyncio.to_thread(_batch, sim, sim_url, "gs://in/a.pdf", "gs://in/gone.pdf")
        settings = load_settings(_google_config(tmp_path, sim_url, key), environ={})
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            tracked = await admin.post("/jobs", json={"source": "g", "job_id": name})
            job_id = tracked.json()["job"]["job_id"]
            files = await _delivered(tmp_path / "out" / "g", [job_id])
            detail = (await admin.get(f"/jobs/g/{job_id}")).json()["job"]
    op_id = name.rsplit("/", 1)[1]
    assert job_id == f"sim-project:us:{op_id}"
    filed = files[job_id]
    assert (filed["state"], filed["provider_status"]) == ("partial", "SUCCEEDED")
    assert filed["error"].startswith("1 of 2 documents failed: gs://in/gone.pdf: NOT_FOUND")
    assert filed["error_code"] == detail["error_code"] == "NOT_FOUND"
    assert filed["fields"] == {"supplier_name": 0.96, "invoice_id": 0.99, "total_amount": 0.68}
    assert detail["fields"] == {"supplier_name": 0.96, "invoice_id": 0.99, "total_amount": 0.68}
    result = (tmp_path / "out" / "g" / f"{safe_name(job_id)}.result").read_bytes()
    assert filed["result"]["sha256"] == hashlib.sha256(result).hexdigest()
    documents = json.loads(result)["documents"]
    assert [len(d["shards"]) for d in documents] == [1, 0]
    assert documents[0]["shards"][0]["object"] == f"results/{op_id}/0/a-0.json"
    assert sim.tokens  # jobhook's token came from the token endpoint, for its key


async def test_an_azure_operation_past_its_retention_expires_with_the_reason(
    tmp_path: Path,
) -> None:
    sim = AzureDocIntelSim(api_key=AZ_KEY, duration=0.0, retention=0.0)
    async with live_server(sim.app()) as sim_url:
        result_id = await asyncio.to_thread(_submit, sim_url, PDF)
        settings = load_settings(_azure_config(tmp_path, sim_url, 6000),
                                 environ={"AZURE_DOCINTEL_KEY": AZ_KEY})  # fmt: skip
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            await admin.post("/jobs", json={"source": "az", "job_id": result_id})
            job_id = f"prebuilt-invoice:{result_id}"
            waited = await admin.get(f"/jobs/az/{job_id}/wait", params={"timeout": 20})
    job = waited.json()["job"]
    assert job["state"] == "expired"
    assert "not found (Document Intelligence keeps results 24 hours)" in job["error"]
    assert [h.status for h in sim.polls_of(result_id)] == [404] * 5
