"""Azure offline, end to end: the official SDK submits to the Document Intelligence simulator
(signing in with Entra ID against the TLS token endpoint simulator), the pipeline registers the
operation with jobhook, and jobhook polls with its own Entra ID tokens and no key, or tracks a
batch analysis and assembles its results from the container in Azurite."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import (
    AnalyzeBatchDocumentsRequest,
    AzureBlobContentSource,
)
from azure.core.credentials import AzureKeyCredential
from azure.identity import ClientSecretCredential

from receiver.config.load import load_settings
from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.sim.azure import AzureDocIntelSim
from tests.adminsupport import AUTH, TOKEN
from tests.azuresupport import CLIENT_ID, CLIENT_SECRET, TENANT, container, serve_tls
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

    from tests.azuresupport import Azurite, Entra

AZ_KEY = "az-sim-key-0123456789"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
                 "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def config(tmp_path: Path, sim_url: str, entra: Entra, azure: str = "") -> Path:
    """One azure source signing in with Entra ID (a client secret), a file handler."""
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "data" / "jobhook.db"}"\n'
        f'[egress]\nca_bundle = "{entra.ca_bundle}"\n'
        f'[sources.az]\nprovider = "azure-docintel"\napi_base_url = "{sim_url}"\n'
        '[sources.az.azure]\nmodel_id = "prebuilt-invoice"\nauth = "entra"\n'
        f'tenant_id = "{TENANT}"\nclient_id = "{CLIENT_ID}"\nclient_secret = "env:AZ_SECRET"\n'
        f'authority = "{entra.authority}"\ndisable_instance_discovery = true\n{azure}'
        "[sources.az.poll]\ninitial_delay = 0.1\nmax_delay = 0.5\nrequests_per_minute = 600\n"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return path


def sdk_credential(entra: Entra) -> ClientSecretCredential:
    """What a pipeline signs in with: azure-identity's (synchronous) client secret credential."""
    return ClientSecretCredential(TENANT, CLIENT_ID, CLIENT_SECRET, authority=entra.authority,
                                  disable_instance_discovery=True,
                                  connection_verify=str(entra.ca_bundle))  # fmt: skip


async def delivered(out: Path, job_id: str) -> dict[str, Any]:
    """The file handler's completion of ``job_id``, once written."""
    path = out / f"{safe_name(job_id)}.json"
    for _ in range(300):  # at most ~15 s
        if path.exists():
            found: dict[str, Any] = json.loads(path.read_text())
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{job_id} was not delivered")


async def test_a_source_with_entra_credentials_polls_with_bearer_tokens_and_no_key(
    tmp_path: Path, entra: Entra
) -> None:
    sim = AzureDocIntelSim(api_key=AZ_KEY, duration=0.5, retry_after=0.2, entra=entra.sim)

    def submit(url: str) -> str:
        with DocumentIntelligenceClient(
            url, sdk_credential(entra), connection_verify=str(entra.ca_bundle)
        ) as client:
            poller = client.begin_analyze_document("prebuilt-invoice", PDF, polling=False)
            result_id: str = poller.details["operation_id"]
            return result_id

    # Over TLS: azure-core sends a bearer token to https URLs only.
    with serve_tls(sim.app(), entra.ca, tmp_path) as sim_url:
        settings = load_settings(config(tmp_path, sim_url, entra),
                                 environ={"AZ_SECRET": CLIENT_SECRET})  # fmt: skip
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            result_id = await asyncio.to_thread(submit, sim_url)
            tracked = await admin.post("/jobs", json={"source": "az", "job_id": result_id})
            done = await delivered(tmp_path / "out" / "az", f"prebuilt-invoice:{result_id}")
    assert tracked.status_code == 200
    assert (done["state"], done["provider_status"]) == ("succeeded", "succeeded")
    assert done["fields"]["InvoiceTotal"] == 0.713
    # Every request, the SDK's and jobhook's, signed in with a bearer token; none with a key.
    assert sim.hits
    assert {h.auth for h in sim.hits} == {"bearer"}
    assert {h.status for h in sim.hits} <= {200, 202}


def batch_config(tmp_path: Path, sim_url: str) -> Path:
    """One azure source with its key, reading batch results with the container's SAS."""
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f'[server]\nadmin_token = "{TOKEN}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "data" / "jobhook.db"}"\n'
        f'[sources.az]\nprovider = "azure-docintel"\napi_base_url = "{sim_url}"\n'
        'api_key = "env:AZ_KEY"\n'
        '[sources.az.azure]\nresult_container_url = "env:AZ_RESULTS"\n'
        "[sources.az.poll]\ninitial_delay = 0.1\nmax_delay = 0.5\nrequests_per_minute = 600\n"
        f'[[handlers]]\nname = "files"\ntype = "file"\ndir = "{tmp_path / "out"}"\n'
    )
    return path


def submit_batch(url: str, source: str, results: str) -> str:
    """What a pipeline does: the SDK's batch call, not waited for; its Operation-Location."""
    locations: list[str] = []

    def hook(response: Any) -> None:
        found = response.http_response.headers.get("Operation-Location")
        if found:
            locations.append(found)

    request = AnalyzeBatchDocumentsRequest(
        azure_blob_source=AzureBlobContentSource(container_url=source),
        result_container_url=results, result_prefix="out/",
    )  # fmt: skip
    with DocumentIntelligenceClient(url, AzureKeyCredential(AZ_KEY)) as client:
        client.begin_analyze_batch_documents("prebuilt-read", request, polling=False,
                                             raw_response_hook=hook)  # fmt: skip
    return locations[0]


async def test_a_batch_is_tracked_and_its_results_assembled_partial_when_a_file_failed(
    tmp_path: Path, azurite: Azurite
) -> None:
    sim = AzureDocIntelSim(api_key=AZ_KEY, duration=0.3, retry_after=0.2)
    source = container(azurite, {"a.pdf": PDF, "b.pdf": PDF, "broken.pdf": PDF[:-7]})
    results = container(azurite)
    failing = container(azurite, {"x.pdf": PDF[:-7], "y.pdf": b"not a document"})
    async with live_server(sim.app()) as sim_url:
        settings = load_settings(batch_config(tmp_path, sim_url),
                                 environ={"AZ_KEY": AZ_KEY, "AZ_RESULTS": results})  # fmt: skip
        async with (
            live_server(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as admin,
        ):
            location = await asyncio.to_thread(submit_batch, sim_url, source, results)
            lost = await asyncio.to_thread(submit_batch, sim_url, failing, results)
            tracked = await admin.post("/jobs", json={"source": "az", "job_id": location})
            job_id = tracked.json()["job"]["job_id"]
            bare = location.split("/analyzeBatchResults/")[1].split("?")[0]
            by_id = {"source": "az", "job_id": f"prebuilt-read:batch:{bare}"}
            also = await admin.post("/jobs", json=by_id)
            tracked_lost = await admin.post("/jobs", json={"source": "az", "job_id": lost})
            done = await delivered(tmp_path / "out" / "az", job_id)
            failed = await delivered(tmp_path / "out" / "az",
                                     tracked_lost.json()["job"]["job_id"])  # fmt: skip
    assert job_id == f"prebuilt-read:batch:{bare}"
    assert also.json()["job"]["job_id"] == job_id
    assert (done["state"], done["provider_status"]) == ("partial", "succeeded")
    assert done["error"].startswith("1 of 3 files not analysed: ")
    assert "broken.pdf: failed (InvalidRequest" in done["error"]
    assert done["error_code"] == "InvalidContent"
    assert AZ_KEY not in json.dumps(done)
    assembled = json.loads((tmp_path / "out" / "az" / f"{safe_name(job_id)}.result").read_text())
    assert (assembled["operation"], assembled["succeededCount"]) == (job_id, 2)
    files = {f["sourceUrl"].rsplit("/", 1)[1]: f for f in assembled["files"]}
    assert files["a.pdf"]["result"]["analyzeResult"]["modelId"] == "prebuilt-read"
    assert files["broken.pdf"]["result"] is None
    assert files["broken.pdf"]["status"] == "failed"
    # No SAS was kept: the assembled result and the completion hold the blobs' own URLs.
    assert "sig=" not in json.dumps(assembled) + json.dumps(done)
    # Every file failed: the batch's own status is succeeded, jobhook's is failed.
    assert (failed["state"], failed["provider_status"], failed["result"]) == (
        "failed", "succeeded", None,
    )  # fmt: skip
    assert "2 of 2 files not analysed" in failed["error"]
