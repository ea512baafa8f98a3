"""Azure batch analysis: its identities, its status and files, and the result container's
reads (only under the configured container, with its own credential)."""

from __future__ import annotations

import hashlib
import json
import ssl
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest
from azure.storage.blob import BlobServiceClient

from receiver.errors import ProviderError
from receiver.models import State
from receiver.providers import get_provider
from receiver.providers.azure import AzureJobAPI, AzureOptions
from receiver.providers.azure_batch import BlobReader
from receiver.providers.jobapi import JobNotFoundError
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret
from tests.azuresupport import CLIENT_ID, CLIENT_SECRET, TENANT

if TYPE_CHECKING:
    from pathlib import Path

    from tests.azuresupport import Azurite, Entra

azure = get_provider("azure-docintel")
RESULT = "7c1e2d3f-0a1b-4c5d-9e8f-112233445566"
ENDPOINT = "https://westeurope.api.cognitive.microsoft.com"
BATCH_LOCATION = (
    f"{ENDPOINT}/documentintelligence/documentModels/prebuilt-layout/analyzeBatchResults/"
    f"{RESULT}?api-version=2024-11-30"
)
BLOBS = "https://acct.blob.core.windows.net/results"
SAS = "sv=2024-11-04&sr=c&sp=rl&sig=c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"


def test_a_batch_is_told_apart_by_its_url_or_its_three_part_id() -> None:
    batch = f"prebuilt-layout:batch:{RESULT}"
    assert azure.job_id(BATCH_LOCATION) == batch
    assert azure.job_id(batch) == batch
    assert azure.job_id(f"prebuilt-layout:{RESULT}") == f"prebuilt-layout:{RESULT}"
    assert azure.job_path(batch) == (
        f"/documentintelligence/documentModels/prebuilt-layout/analyzeBatchResults/{RESULT}"
        "?api-version=2024-11-30"
    )
    with pytest.raises(ValueError, match="not a model id"):
        azure.job_id(f"prebuilt-layout:other:{RESULT}")


def _detail(name: str, status: str = "succeeded", **extra: object) -> dict[str, object]:
    found: dict[str, object] = {"sourceUrl": f"https://acct.blob.core.windows.net/in/{name}",
                                "status": status}  # fmt: skip
    if status == "succeeded":
        found["resultUrl"] = f"{BLOBS}/out/{name}.ocr.json"
    return found | extra


def _batch(*details: dict[str, object], status: str = "succeeded") -> dict[str, object]:
    return {"status": status, "result": {"succeededCount": 0, "failedCount": 0,
                                         "skippedCount": 0, "details": list(details)}}  # fmt: skip


@pytest.mark.parametrize("word", ["succeeded", "completed"])
def test_every_file_analysed_is_succeeded_with_a_result_to_assemble(word: str) -> None:
    status = azure.parse_job(_batch(_detail("a.pdf"), _detail("b.pdf"), status=word),
                             source="az", job_id=f"m1:batch:{RESULT}")  # fmt: skip
    assert (status.state, status.provider_status, status.error) == (State.SUCCEEDED, word, None)
    assert status.result is not None
    assert status.result.assemble == "batch"
    assert [f["ok"] for f in status.result.inline["files"]] == [True, True]


def test_failed_and_skipped_files_make_it_partial_and_are_named() -> None:
    inner = {"code": "InvalidContent", "message": "The file is corrupted."}
    error = {"code": "InvalidRequest", "message": "Invalid request.", "innererror": inner}
    status = azure.parse_job(
        _batch(_detail("a.pdf"), _detail("b.pdf", "failed", error=error),
               _detail("c.pdf", "skipped")),
        source="az", job_id=f"m1:batch:{RESULT}",
    )  # fmt: skip
    assert status.state is State.PARTIAL
    assert status.error_code == "InvalidContent"
    assert status.error is not None
    assert status.error.startswith("2 of 3 files not analysed: in/b.pdf: failed (InvalidRequest")
    assert "in/c.pdf: skipped" in status.error


def test_every_file_failed_is_failed_with_nothing_to_assemble() -> None:
    status = azure.parse_job(_batch(_detail("a.pdf", "failed"), _detail("b.pdf", "skipped")),
                             source="az", job_id=f"m1:batch:{RESULT}")  # fmt: skip
    assert (status.state, status.provider_status, status.result) == (
        State.FAILED, "succeeded", None,
    )  # fmt: skip


def test_the_guides_form_with_the_counts_at_the_top_is_read_too() -> None:
    body = {"status": "completed", "succeededCount": 1, "details": [_detail("a.pdf")]}
    status = azure.parse_job(body, source="az", job_id=f"m1:batch:{RESULT}")
    assert status.state is State.SUCCEEDED
    assert status.result is not None
    assert status.result.inline["succeededCount"] == 1


def test_a_sas_echoed_in_a_url_is_never_kept() -> None:
    detail = _detail("a.pdf")
    detail["resultUrl"] = f"{detail['resultUrl']}?{SAS}"
    status = azure.parse_job(_batch(detail), source="az", job_id=f"m1:batch:{RESULT}")
    assert status.result is not None
    assert "sig=" not in str(status.result.inline)


def test_a_failed_batch_keeps_its_error() -> None:
    inner = {"code": "ContainerAccessDenied"}
    error = {"code": "InvalidRequest", "message": "No access.", "innererror": inner}
    body = {"status": "failed", "error": error}
    status = azure.parse_job(body, source="az", job_id=f"m1:batch:{RESULT}")
    assert (status.state, status.error_code) == (State.FAILED, "ContainerAccessDenied")


def test_the_result_container_url_is_a_container() -> None:
    assert AzureOptions(result_container_url=f"{BLOBS}?{SAS}").container_sas  # type: ignore[arg-type]
    assert not AzureOptions(result_container_url=BLOBS).container_sas  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name the container"):
        AzureOptions(result_container_url="https://acct.blob.core.windows.net/")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="https URL"):
        AzureOptions(authority="http://login.example")


def _reader(client: httpx.AsyncClient, container: str | None) -> BlobReader:
    return BlobReader(source="az", client=client, limiter=RateLimiter(6000, name="az"),
                      container=Secret(container) if container else None, tokens=None,
                      count=lambda outcome: None)  # fmt: skip


async def test_only_blobs_in_the_container_are_read_with_its_sas() -> None:
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        if request.url.path.endswith("gone.ocr.json"):
            return httpx.Response(404, headers={"x-ms-error-code": "BlobNotFound"})
        if request.url.path.endswith("denied.ocr.json"):
            return httpx.Response(403, headers={"x-ms-error-code": "AuthorizationFailure"})
        return httpx.Response(200, content=b'{"status":"succeeded"}')

    chunks: list[bytes] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        reader = _reader(client, f"{BLOBS}?{SAS}")
        await reader.stream(f"{BLOBS}/out/a.pdf.ocr.json", chunks.append)
        with pytest.raises(ProviderError, match="not in the result container"):
            await reader.stream("https://other.blob.core.windows.net/results/a.ocr.json",
                                chunks.append)  # fmt: skip
        with pytest.raises(ProviderError, match="not in the result container"):
            await reader.stream(f"{BLOBS}-evil/a.ocr.json", chunks.append)
        with pytest.raises(JobNotFoundError, match="gone"):
            await reader.stream(f"{BLOBS}/out/gone.ocr.json", chunks.append)
        with pytest.raises(ProviderError, match="cannot read the container") as denied:
            await reader.stream(f"{BLOBS}/out/denied.ocr.json", chunks.append)
        with pytest.raises(ProviderError, match="does not set"):
            await _reader(client, None).stream(f"{BLOBS}/out/a.pdf.ocr.json", chunks.append)
    assert b"".join(chunks) == b'{"status":"succeeded"}'
    assert len(asked) == 3  # the refused URLs were never asked
    assert asked[0].url.params["sig"] == "c2VjcmV0LXNpZ25hdHVyZQ=="
    assert asked[0].headers["x-ms-version"]
    assert "Ocp-Apim-Subscription-Key" not in asked[0].headers
    assert "sig" not in str(denied.value)


async def test_a_container_without_a_sas_is_read_with_an_entra_storage_token(
    azurite_oauth: Azurite, entra: Entra, tmp_path: Path
) -> None:
    name = f"c{uuid.uuid4().hex[:12]}"
    blobs = BlobServiceClient.from_connection_string(
        azurite_oauth.connection_string, connection_verify=str(entra.ca_bundle)
    )
    blob = b'{"status":"succeeded","analyzeResult":{"modelId":"prebuilt-read"}}'
    blobs.create_container(name).upload_blob("out/a.pdf.ocr.json", blob)
    container = f"{azurite_oauth.endpoint}/{name}"
    options = AzureOptions(
        tenant_id=TENANT, client_id=CLIENT_ID, client_secret=Secret(CLIENT_SECRET),
        authority=entra.authority, disable_instance_discovery=True,
        result_container_url=Secret(container),  # type: ignore[arg-type]
    )  # fmt: skip
    provider = get_provider("azure-docintel", table=options)
    details = [{"sourceUrl": "https://in.example/in/a.pdf", "status": "succeeded",
                "resultUrl": f"{container}/out/a.pdf.ocr.json"},
               {"sourceUrl": "https://in.example/in/b.pdf", "status": "failed"}]  # fmt: skip
    job_id = f"prebuilt-read:batch:{RESULT}"
    status = provider.parse_job(_batch(*details), source="az", job_id=job_id)
    assert status.result is not None
    context = ssl.create_default_context(cafile=entra.ca_bundle)
    async with httpx.AsyncClient(verify=context, trust_env=False) as client:
        api = AzureJobAPI(source="az", provider=provider, base_url="https://docintel.invalid",
                          api_key=Secret("k" * 32), client=client,
                          limiter=RateLimiter(6000, name="az"))  # fmt: skip
        digest, size = await api.write_result(job_id, status.result, tmp_path / "batch.json")
    written = (tmp_path / "batch.json").read_bytes()
    assert (hashlib.sha256(written).hexdigest(), len(written)) == (digest, size)
    document = json.loads(written)
    assert document["operation"] == job_id
    assert [f["status"] for f in document["files"]] == ["succeeded", "failed"]
    assert document["files"][0]["result"]["analyzeResult"]["modelId"] == "prebuilt-read"
    assert document["files"][1]["result"] is None
    assert api.tokens is not None
    assert api.tokens.requested == 1  # a storage token; the key was never sent to storage
