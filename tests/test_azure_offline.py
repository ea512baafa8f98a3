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
from azure.identity import ClientSecretCredential

from receiver.config.load import load_settings
from receiver.files import safe_name
from receiver.service.app import create_app
from receiver.sim.azure import AzureDocIntelSim
from tests.adminsupport import AUTH, TOKEN
from tests.azuresupport import CLIENT_ID, CLIENT_SECRET, TENANT, serve_tls
from tests.support import live_server

if TYPE_CHECKING:
    from pathlib import Path

    from tests.azuresupport import Entra

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
