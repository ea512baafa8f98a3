"""``azure-ai-documentintelligence`` 1.0.2's batch analysis against the simulator, with the
documents and results in Azurite: the SDK's request, poller and models are the spec."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import (
    AnalyzeBatchDocumentsRequest,
    AnalyzeBatchResult,
    AzureBlobContentSource,
    AzureBlobFileListContentSource,
)
from azure.core.credentials import AzureKeyCredential
from azure.storage.blob import BlobServiceClient

from receiver.sim.azure import AzureDocIntelSim
from tests.azuresupport import container
from tests.support import live_server

if TYPE_CHECKING:
    from tests.azuresupport import Azurite

KEY = "az-sim-key-0123456789"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def result_blobs(azurite: Azurite, sas_url: str) -> dict[str, Any]:
    name = sas_url.split("?")[0].rsplit("/", 1)[1]
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    found = service.get_container_client(name)
    return {b.name: json.loads(found.download_blob(b.name).readall()) for b in found.list_blobs()}


def analyze_batch(
    url: str, request: AnalyzeBatchDocumentsRequest
) -> tuple[str, AnalyzeBatchResult]:
    """The SDK's batch call, waited for: the Operation-Location and the result."""
    locations: list[str] = []

    def hook(response: Any) -> None:
        location = response.http_response.headers.get("Operation-Location")
        if location:
            locations.append(location)

    with DocumentIntelligenceClient(url, AzureKeyCredential(KEY)) as client:
        poller = client.begin_analyze_batch_documents(
            "prebuilt-layout", request, raw_response_hook=hook, polling_interval=0.1
        )
        return locations[0], poller.result()


async def test_a_batch_writes_each_result_to_the_container_and_reports_each_file(
    azurite: Azurite,
) -> None:
    sim = AzureDocIntelSim(api_key=KEY, duration=0.2, retry_after=0.1)
    source = container(azurite, {"in/a.pdf": PDF, "in/b.pdf": PDF, "in/c.pdf": PDF[:-7],
                                 "other/d.pdf": PDF})  # fmt: skip
    results = container(azurite)
    request = AnalyzeBatchDocumentsRequest(
        azure_blob_source=AzureBlobContentSource(container_url=source, prefix="in/"),
        result_container_url=results, result_prefix="out/",
    )  # fmt: skip
    async with live_server(sim.app()) as url:
        location, result = await asyncio.to_thread(analyze_batch, url, request)
    assert "/documentModels/prebuilt-layout/analyzeBatchResults/" in location
    assert (result.succeeded_count, result.failed_count, result.skipped_count) == (2, 1, 0)
    by_name = {d.source_url.rsplit("/", 1)[1]: d for d in result.details or []}
    assert sorted(by_name) == ["a.pdf", "b.pdf", "c.pdf"]
    assert by_name["c.pdf"].status == "failed"
    assert by_name["c.pdf"].error is not None
    assert by_name["c.pdf"].error.code == "InvalidRequest"
    assert by_name["c.pdf"].result_url is None
    assert by_name["a.pdf"].status == "succeeded"
    assert by_name["a.pdf"].result_url.endswith("/out/in/a.pdf.ocr.json")
    # No SAS in what the operation reports: its URLs are the blobs' own.
    assert all("sig=" not in (d.result_url or "") + d.source_url for d in result.details or [])
    written = result_blobs(azurite, results)
    assert sorted(written) == ["out/in/a.pdf.ocr.json", "out/in/b.pdf.ocr.json"]
    assert written["out/in/a.pdf.ocr.json"]["analyzeResult"]["modelId"] == "prebuilt-layout"


async def test_existing_results_are_skipped_unless_overwritten_and_batches_are_listed(
    azurite: Azurite,
) -> None:
    sim = AzureDocIntelSim(api_key=KEY, duration=0.1, retry_after=0.1)
    listing = b'{"file": "a.pdf"}\n{"file": "b.pdf"}\n'
    source = container(azurite, {"a.pdf": PDF, "b.pdf": PDF, "list.jsonl": listing})
    results = container(azurite)

    def request(overwrite: bool | None) -> AnalyzeBatchDocumentsRequest:
        listed = AzureBlobFileListContentSource(container_url=source, file_list="list.jsonl")
        return AnalyzeBatchDocumentsRequest(azure_blob_file_list_source=listed,
                                            result_container_url=results,
                                            overwrite_existing=overwrite)  # fmt: skip

    async with live_server(sim.app()) as url:
        _, first = await asyncio.to_thread(analyze_batch, url, request(None))
        _, again = await asyncio.to_thread(analyze_batch, url, request(False))
        _, overwritten = await asyncio.to_thread(analyze_batch, url, request(True))

        def listed() -> list[str]:
            with DocumentIntelligenceClient(url, AzureKeyCredential(KEY)) as client:
                return [op.status for op in client.list_analyze_batch_results("prebuilt-layout")]

        statuses = await asyncio.to_thread(listed)
    assert (first.succeeded_count, first.skipped_count) == (2, 0)
    assert (again.succeeded_count, again.skipped_count) == (0, 2)
    assert {d.status for d in again.details or []} == {"skipped"}
    assert (overwritten.succeeded_count, overwritten.skipped_count) == (2, 0)
    assert statuses == ["succeeded"] * 3
