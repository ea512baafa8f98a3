"""``google-cloud-documentai`` 3.16.0 (REST) and ``google-cloud-storage`` against the Document AI
simulator, as a pipeline calls them: a service-account key whose ``token_uri`` is the simulator,
inputs uploaded and outputs read through the storage emulator host."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from google.api_core import exceptions as google_errors
from google.cloud import documentai_v1 as documentai
from google.cloud import storage
from google.oauth2 import service_account

from receiver.sim.google import DocumentAISim
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
PROCESSOR = "projects/sim-project/locations/us/processors/invoice-1"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[DocumentAISim, str]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sim = DocumentAISim(public_url=url, duration=0.3)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    async with live_server(sim.app(), port=port):
        yield sim, url


def docai(sim: DocumentAISim, url: str) -> documentai.DocumentProcessorServiceClient:
    creds = service_account.Credentials.from_service_account_info(
        sim.service_account_key(), scopes=SCOPES
    )
    return documentai.DocumentProcessorServiceClient(
        transport="rest", credentials=creds, client_options={"api_endpoint": url}
    )


def submit(client: documentai.DocumentProcessorServiceClient, *uris: str) -> Any:
    request = documentai.BatchProcessRequest(
        name=PROCESSOR,
        input_documents=documentai.BatchDocumentsInputConfig(
            gcs_documents=documentai.GcsDocuments(
                documents=[
                    documentai.GcsDocument(gcs_uri=u, mime_type="application/pdf") for u in uris
                ]
            )
        ),
        document_output_config=documentai.DocumentOutputConfig(
            gcs_output_config=documentai.DocumentOutputConfig.GcsOutputConfig(
                gcs_uri="gs://out/results/"
            )
        ),
    )
    return client.batch_process_documents(request=request)


def upload(name: str, data: bytes) -> None:
    client = storage.Client(project="sim-project")
    client.bucket("in").blob(name).upload_from_string(data, content_type="application/pdf")


def run_batch(sim: DocumentAISim, url: str, *uris: str) -> tuple[str, Any, dict[str, Any]]:
    """Submit, wait with the SDK's operation, read every output shard with google-cloud-storage."""
    operation = submit(docai(sim, url), *uris)
    operation.result(timeout=30)
    metadata = operation.metadata
    shards = {}
    client = storage.Client(project="sim-project")
    for status in metadata.individual_process_statuses:
        if not status.output_gcs_destination:
            continue  # this input failed
        bucket, _, prefix = status.output_gcs_destination.removeprefix("gs://").partition("/")
        for blob in client.list_blobs(bucket, prefix=prefix + "/"):
            shards[blob.name] = json.loads(blob.download_as_bytes())
    return operation.operation.name, metadata, shards


async def test_a_batch_runs_and_its_shards_are_read_with_the_storage_library(
    served: tuple[DocumentAISim, str],
) -> None:
    sim, url = served
    await asyncio.to_thread(upload, "a.pdf", PDF)
    name, metadata, shards = await asyncio.to_thread(run_batch, sim, url, "gs://in/a.pdf")
    assert name.startswith("projects/sim-project/locations/us/operations/")
    assert metadata.state == documentai.BatchProcessMetadata.State.SUCCEEDED
    (status,) = metadata.individual_process_statuses
    op_id = name.rsplit("/", 1)[1]
    assert status.output_gcs_destination == f"gs://out/results/{op_id}/0"
    (shard,) = shards.values()
    document = documentai.Document.from_json(json.dumps(shard), ignore_unknown_fields=False)
    assert [(e.type_, round(e.confidence, 2)) for e in document.entities] == [
        ("supplier_name", 0.96), ("invoice_id", 0.99), ("total_amount", 0.68)]  # fmt: skip
    # The SDK signs its own JWT with the key (no token exchange): the simulator checked it
    # against the key's public key, as Google does.
    assert not [h for h in sim.hits if h.status == 401]


async def test_one_missing_input_fails_alone_and_all_failing_fails_the_operation(
    served: tuple[DocumentAISim, str],
) -> None:
    sim, url = served
    await asyncio.to_thread(upload, "a.pdf", PDF)
    await asyncio.to_thread(upload, "notes.pdf", b"plain text")
    _, metadata, shards = await asyncio.to_thread(run_batch, sim, url, "gs://in/a.pdf",
                                                  "gs://in/missing.pdf")  # fmt: skip
    statuses = metadata.individual_process_statuses
    assert [s.status.code for s in statuses] == [0, 5]
    assert len(shards) == 1
    with pytest.raises(google_errors.GoogleAPICallError) as caught:
        await asyncio.to_thread(run_batch, sim, url, "gs://in/notes.pdf")
    assert "Failed to process all documents" in str(caught.value)


async def test_a_jwt_signed_by_another_key_is_refused(served: tuple[DocumentAISim, str]) -> None:
    sim, url = served
    other = DocumentAISim(public_url=url)  # another key pair, same email and token_uri
    with pytest.raises(google_errors.Unauthorized):
        await asyncio.to_thread(submit, docai(other, url), "gs://in/a.pdf")
    assert not sim.operations


async def test_more_than_five_unfinished_batches_are_refused(
    served: tuple[DocumentAISim, str],
) -> None:
    sim, url = served
    sim.duration = 30.0
    client = docai(sim, url)
    for _ in range(5):
        await asyncio.to_thread(submit, client, "gs://in/a.pdf")
    with pytest.raises(google_errors.TooManyRequests):
        await asyncio.to_thread(submit, client, "gs://in/a.pdf")
