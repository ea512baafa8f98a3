"""``azure-ai-documentintelligence`` 1.0.2 against the Document Intelligence simulator, as a
pipeline calls it: every answer must parse in the SDK's models and drive its poller."""

from __future__ import annotations

import asyncio
import base64
import itertools
from typing import TYPE_CHECKING, Any

import pytest
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import AnalyzeDocumentRequest, AnalyzeResult
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.core.rest import HttpRequest

from receiver.sim.azure import AzureDocIntelSim
from tests.support import live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

KEY = "az-sim-key-0123456789"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n2 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture
async def served() -> AsyncIterator[tuple[AzureDocIntelSim, str]]:
    sim = AzureDocIntelSim(api_key=KEY, duration=0.3, retry_after=0.2)
    async with live_server(sim.app()) as url:
        yield sim, url


def _client(url: str, key: str = KEY) -> DocumentIntelligenceClient:
    return DocumentIntelligenceClient(url, AzureKeyCredential(key), retry_total=2)


def _analyze(url: str, body: Any, model: str = "prebuilt-invoice") -> tuple[str, AnalyzeResult]:
    with _client(url) as client:
        poller = client.begin_analyze_document(model, body)
        return poller.details["operation_id"], poller.result()


async def test_an_invoice_is_analysed_and_its_fields_parse_in_the_sdk(
    served: tuple[AzureDocIntelSim, str],
) -> None:
    sim, url = served
    result_id, result = await asyncio.to_thread(_analyze, url, PDF)
    assert result.model_id == "prebuilt-invoice"
    assert result.api_version == "2024-11-30"
    assert [p.page_number for p in result.pages] == [1, 2]
    fields = result.documents[0].fields
    assert fields["InvoiceTotal"].value_currency.amount == 1280.0
    assert fields["InvoiceTotal"].confidence == pytest.approx(0.713)
    assert fields["InvoiceId"].value_string == "INV-100"
    # The SDK polled the Operation-Location it was given, no faster than its Retry-After.
    polls = sim.polls_of(result_id)
    assert polls
    assert all(b.at - a.at >= 0.19 for a, b in itertools.pairwise(polls))
    submitted = [h for h in sim.hits if h.method == "POST"]
    assert submitted[0].path == "/documentintelligence/documentModels/prebuilt-invoice:analyze"


async def test_a_base64_source_and_the_read_model_have_no_documents(
    served: tuple[AzureDocIntelSim, str],
) -> None:
    _, url = served
    body = AnalyzeDocumentRequest(bytes_source=PDF)
    _, result = await asyncio.to_thread(_analyze, url, body, "prebuilt-read")
    assert result.documents is None
    assert result.content.startswith("Page 1")
    assert base64.b64decode(base64.b64encode(PDF)) == PDF


async def test_a_truncated_pdf_fails_in_the_operation_with_invalid_content(
    served: tuple[AzureDocIntelSim, str],
) -> None:
    sim, url = served
    with pytest.raises(HttpResponseError) as caught:
        await asyncio.to_thread(_analyze, url, PDF[:-7])
    # The SDK reads the failed operation's error into its exception.
    assert caught.value.error is not None
    assert caught.value.error.code == "InvalidRequest"
    assert "InvalidContent" in str(caught.value)
    assert sim.hits[0].status == 202


async def test_no_document_a_wrong_key_and_an_unknown_model_are_refused_at_once(
    served: tuple[AzureDocIntelSim, str],
) -> None:
    sim, url = served

    def wrong_key() -> None:
        with _client(url, "wrong") as client:
            client.begin_analyze_document("prebuilt-read", PDF)

    with pytest.raises(HttpResponseError) as not_a_document:
        await asyncio.to_thread(_analyze, url, b"hello, not a pdf")
    with pytest.raises(ClientAuthenticationError):
        await asyncio.to_thread(wrong_key)
    with pytest.raises(HttpResponseError) as unknown_model:
        await asyncio.to_thread(_analyze, url, PDF, "my-model")
    assert not_a_document.value.status_code == 400
    assert not_a_document.value.error is not None
    assert not_a_document.value.error.code == "InvalidRequest"
    assert unknown_model.value.status_code == 404
    assert [h.status for h in sim.hits] == [400, 401, 404]
    assert not sim.operations


async def test_over_the_per_second_limit_the_answer_is_429_with_retry_after() -> None:
    sim = AzureDocIntelSim(api_key=KEY, duration=0.0, requests_per_second=2)
    async with live_server(sim.app()) as url:
        # The SDK's retry policy waits the Retry-After of each 429 and gets through.
        results = await asyncio.gather(*(asyncio.to_thread(_analyze, url, PDF) for _ in range(3)))
    assert len(results) == 3
    assert [h for h in sim.hits if h.status == 429]
    accepted = [h.at for h in sim.hits if h.status != 429]
    # Never more than two accepted in any second: the third of a window was refused.
    assert all(b - a >= 1.0 for a, b in zip(accepted, accepted[2:], strict=False))


async def test_an_operation_is_gone_after_the_retention_period() -> None:
    sim = AzureDocIntelSim(api_key=KEY, duration=0.0, retention=0.2)
    async with live_server(sim.app()) as url:
        result_id, _ = await asyncio.to_thread(_analyze, url, PDF)
        await asyncio.sleep(0.3)

        def poll_again() -> int:
            path = f"/documentModels/prebuilt-invoice/analyzeResults/{result_id}"
            with _client(url) as client:
                asked = HttpRequest("GET", path, params={"api-version": "2024-11-30"})
                status: int = client.send_request(asked).status_code
                return status

        assert await asyncio.to_thread(poll_again) == 404
