"""Azure Document Intelligence: operation identities, poll answers, Retry-After, retention."""

from __future__ import annotations

import time

import httpx
import pytest

from receiver.errors import PayloadError, ProviderError
from receiver.models import ResultRef, State
from receiver.providers import get_provider
from receiver.providers.azure import AzureJobAPI, AzureOptions
from receiver.providers.jobapi import JobNotFoundError
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret
from receiver.sim.azure import AzureDocIntelSim, Operation
from tests.support import live_server

azure = get_provider("azure-docintel")
with_model = get_provider("azure-docintel", table=AzureOptions(model_id="prebuilt-invoice"))
RESULT = "3b0f6e5c-9a43-4f1c-8f52-d1f2a3b4c5d6"
LOCATION = (
    "https://westeurope.api.cognitive.microsoft.com/documentintelligence/documentModels/"
    f"prebuilt-invoice/analyzeResults/{RESULT}?api-version=2024-11-30"
)
KEY = "az-key-0123456789"


@pytest.mark.parametrize(
    ("given", "provider"),
    [(LOCATION, azure), (f"prebuilt-invoice:{RESULT}", azure), (f" {RESULT} ", with_model)],
)
def test_what_a_pipeline_has_becomes_model_and_result_id(given: str, provider: object) -> None:
    assert azure.job_id(LOCATION) == f"prebuilt-invoice:{RESULT}"
    assert getattr(provider, "job_id")(given) == f"prebuilt-invoice:{RESULT}"  # noqa: B009


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (RESULT, "model_id"),  # a bare id needs the source's model
        ("https://x.example/formrecognizer/documentModels/m/analyzeResults/1", "Operation-Loc"),
        ("bad model:1", "not a model id"),
        ("prebuilt-invoice:", "not a model id"),
    ],
)
def test_anything_else_is_refused_saying_what_is_expected(given: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        azure.job_id(given)


def test_the_polling_path_carries_the_api_version() -> None:
    assert azure.job_path(f"prebuilt-invoice:{RESULT}") == (
        f"/documentintelligence/documentModels/prebuilt-invoice/analyzeResults/{RESULT}"
        "?api-version=2024-11-30"
    )
    with pytest.raises(ProviderError):
        azure.job_path(RESULT)


@pytest.mark.parametrize(
    ("word", "state"),
    [("notStarted", State.QUEUED), ("running", State.RUNNING), ("canceled", State.CANCELLED)],
)
def test_status_words(word: str, state: State) -> None:
    status = azure.parse_job({"status": word}, source="az", job_id="m:1")
    assert (status.state, status.provider_status, status.result) == (state, word, None)


def test_a_succeeded_operation_holds_its_analyze_result_inline() -> None:
    analyzed = {"modelId": "prebuilt-read", "content": "hello", "pages": []}
    status = azure.parse_job({"status": "succeeded", "analyzeResult": analyzed},
                             source="az", job_id="m:1")  # fmt: skip
    assert status.result == ResultRef(inline=analyzed)
    with pytest.raises(ProviderError, match="without an analyzeResult"):
        azure.parse_job({"status": "succeeded"}, source="az", job_id="m:1")


def test_a_failed_operation_keeps_its_innermost_code_and_every_message() -> None:
    inner = {"code": "InvalidContent", "message": "The file is corrupted."}
    error = {"code": "InvalidRequest", "message": "Invalid request.", "innererror": inner}
    status = azure.parse_job({"status": "failed", "error": error}, source="az", job_id="m:1")
    assert (status.state, status.error_code) == (State.FAILED, "InvalidContent")
    assert status.error == (
        "InvalidRequest: Invalid request. (InvalidContent: The file is corrupted.)"
    )


def test_it_sends_no_webhooks() -> None:
    with pytest.raises(PayloadError):
        azure.parse_webhook({}, source="az", message_id=None)


def _api(url: str, client: httpx.AsyncClient, rpm: float = 6000.0) -> AzureJobAPI:
    return AzureJobAPI(source="az", provider=azure, base_url=url, api_key=Secret(KEY),
                       client=client, limiter=RateLimiter(rpm, name="az"))  # fmt: skip


def _operation(sim: AzureDocIntelSim, result_id: str = RESULT) -> str:
    sim.operations[result_id] = Operation(
        result_id, "prebuilt-invoice", "2024-11-30", sim.clock(), "2026-11-26T00:00:00Z", 1, False
    )
    return f"prebuilt-invoice:{result_id}"


async def test_each_answer_keeps_the_retry_after_it_came_with() -> None:
    sim = AzureDocIntelSim(api_key=KEY, duration=10.0, retry_after=3)
    async with live_server(sim.app()) as url, httpx.AsyncClient() as client:
        job_id = _operation(sim)
        sim.operations[RESULT].started -= 2.0
        running = await _api(url, client).get_job(job_id)
        sim.operations[RESULT].started -= 10.0
        done = await _api(url, client).get_job(job_id, urgent=True)
    assert (running.state, running.retry_after) == (State.RUNNING, 3.0)
    assert done.state is State.SUCCEEDED
    assert done.result is not None
    assert done.result.inline["documents"][0]["fields"]["InvoiceTotal"]["confidence"] == 0.713
    assert [h.status for h in sim.hits] == [200, 200]


async def test_an_operation_past_its_retention_is_not_found_and_says_why() -> None:
    sim = AzureDocIntelSim(api_key=KEY, retention=0.0)
    async with live_server(sim.app()) as url, httpx.AsyncClient() as client:
        job_id = _operation(sim)
        with pytest.raises(JobNotFoundError, match="keeps results 24 hours"):
            await _api(url, client).get_job(job_id)


async def test_a_429_defers_the_budget_by_its_retry_after() -> None:
    sim = AzureDocIntelSim(api_key=KEY, requests_per_second=1)
    async with live_server(sim.app()) as url, httpx.AsyncClient() as client:
        api = _api(url, client)
        job_id = _operation(sim)
        await api.get_job(job_id)
        with pytest.raises(ProviderError) as caught:
            await api.get_job(job_id)
        refused = time.monotonic()
        await api.limiter.acquire()  # the next request's slot
    assert time.monotonic() - refused >= 0.95
    assert caught.value.retry_after == 1.0
    assert api.calls == {"200": 1, "429": 1}


async def test_a_wrong_key_is_a_provider_error_not_a_missing_job() -> None:
    sim = AzureDocIntelSim(api_key="another")
    async with live_server(sim.app()) as url, httpx.AsyncClient() as client:
        with pytest.raises(ProviderError, match="401") as caught:
            await _api(url, client).get_job(_operation(sim))
    assert not isinstance(caught.value, JobNotFoundError)
