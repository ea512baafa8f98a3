"""Google Document AI: operation names, operation answers, tokens, and shards assembled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from typing import TYPE_CHECKING

import httpx
import pytest
import trustme

from receiver.errors import ChecksumError, ProviderError, ResultTooLargeError
from receiver.models import ResultRef, State
from receiver.pipeline.egress import Egress
from receiver.providers import get_provider
from receiver.providers.google import GcpOptions, GoogleJobAPI
from receiver.providers.jobapi import JobNotFoundError
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret
from receiver.sim.google import DocumentAISim
from tests.pipeline.test_egress import _pipe, connect_proxy
from tests.support import free_port, live_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

google = get_provider("google-docai")
NAME = "projects/p-1/locations/eu/operations/8437264"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def test_an_operation_name_becomes_one_route_safe_segment() -> None:
    assert google.job_id(NAME) == "p-1:eu:8437264"
    assert google.job_id("p-1:eu:8437264") == "p-1:eu:8437264"
    named = get_provider("google-docai", table=GcpOptions(project="p-1", location="eu"))
    assert named.job_id("8437264") == "p-1:eu:8437264"
    assert google.job_path("p-1:eu:8437264") == "/v1/" + NAME


@pytest.mark.parametrize("given", ["8437264", "projects/p/operations/1", "a:b:c/d", "a b:c:d"])
def test_anything_else_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="operation"):
        google.job_id(given)


def test_a_running_operation_and_its_words() -> None:
    running = {"name": NAME, "metadata": {"state": "RUNNING"}}
    assert google.parse_job(running, source="g", job_id="j").state is State.RUNNING
    waiting = {"name": NAME, "metadata": {"state": "WAITING"}}
    assert google.parse_job(waiting, source="g", job_id="j").state is State.QUEUED
    cancelled = {"name": NAME, "done": True, "metadata": {"state": "CANCELLED"}}
    assert google.parse_job(cancelled, source="g", job_id="j").state is State.CANCELLED


@pytest.mark.parametrize("body", [{}, {"metadata": {"state": "RUNNING"}}, {"name": 7}])
def test_an_answer_that_names_no_operation_is_a_provider_error(body: object) -> None:
    with pytest.raises(ProviderError, match="not an operation"):
        google.parse_job(body, source="g", job_id="j")


def _done(*statuses: dict[str, object]) -> dict[str, object]:
    metadata = {"state": "SUCCEEDED", "individualProcessStatuses": list(statuses)}
    return {"name": NAME, "done": True, "metadata": metadata}


OK = {"inputGcsSource": "gs://in/a.pdf", "status": {}, "outputGcsDestination": "gs://o/r/1/0"}
MISSING = {"inputGcsSource": "gs://in/b.pdf", "status": {"code": 5, "message": "no such file"}}


def test_a_succeeded_batch_is_assembled_from_its_outputs() -> None:
    status = google.parse_job(_done(OK), source="g", job_id="j")
    assert (status.state, status.error) == (State.SUCCEEDED, None)
    assert status.result == ResultRef(
        inline=[{"input": "gs://in/a.pdf", "output": "gs://o/r/1/0", "status": {}, "ok": True}],
        assemble="gcs",
    )


def test_one_failed_document_makes_the_batch_partial_with_details() -> None:
    status = google.parse_job(_done(OK, MISSING), source="g", job_id="j")
    assert (status.state, status.error_code) == (State.PARTIAL, "NOT_FOUND")
    assert status.error == "1 of 2 documents failed: gs://in/b.pdf: NOT_FOUND: no such file"
    assert status.result is not None


def test_an_operation_error_fails_it() -> None:
    body = {"name": NAME, "done": True, "error": {"code": 3, "message": "all failed"},
            "metadata": {"state": "FAILED"}}  # fmt: skip
    status = google.parse_job(body, source="g", job_id="j")
    assert (status.state, status.error_code, status.error) == (
        State.FAILED, "INVALID_ARGUMENT", "INVALID_ARGUMENT: all failed")  # fmt: skip
    assert status.result is None


@pytest.fixture
async def served() -> object:
    port = free_port()
    sim = DocumentAISim(public_url=f"http://127.0.0.1:{port}", duration=0.0)
    async with live_server(sim.app(), port=port) as url:
        yield sim, url


def _api(sim: DocumentAISim, url: str, client: httpx.AsyncClient) -> GoogleJobAPI:
    options = GcpOptions(credentials=Secret(json.dumps(sim.service_account_key())),
                         storage_url=url)  # fmt: skip
    provider = get_provider("google-docai", table=options)
    return GoogleJobAPI(source="g", provider=provider, base_url=url, api_key=Secret(""),
                        client=client, limiter=RateLimiter(6000.0, name="g"))  # fmt: skip


async def _finished(sim: DocumentAISim, api: GoogleJobAPI, *inputs: str) -> str:
    from receiver.sim.google import BatchOperation

    sim.put("gs://in/a.pdf", PDF)
    name = "projects/sim-project/locations/us/operations/77"
    op = BatchOperation(name, "sim-project", list(inputs), "gs://out/results", sim.clock(), "")
    sim.operations["77"] = op
    return "sim-project:us:77"


async def test_the_token_comes_from_the_key_and_the_shards_are_checked_and_assembled(
    served: tuple[DocumentAISim, str], tmp_path: Path
) -> None:
    sim, url = served
    async with httpx.AsyncClient() as client:
        api = _api(sim, url, client)
        job_id = await _finished(sim, api, "gs://in/a.pdf", "gs://in/missing.pdf")
        status = await api.get_job(job_id)
        assert status.result is not None
        sha256, size = await api.write_result(job_id, status.result, tmp_path / "r.json")
        again = await api.get_job(job_id)
    assert status.state is State.PARTIAL
    assert len(sim.tokens) == 1  # one token exchange, reused
    assert again.state is State.PARTIAL
    assembled = json.loads((tmp_path / "r.json").read_bytes())
    assert size == (tmp_path / "r.json").stat().st_size
    assert len(sha256) == 64
    (document,) = [d for d in assembled["documents"] if d["shards"]]
    (shard,) = document["shards"]
    assert shard["object"] == "results/77/0/a-0.json"
    assert [e["type"] for e in shard["document"]["entities"]] == [
        "supplier_name", "invoice_id", "total_amount"]  # fmt: skip


async def test_a_shard_that_does_not_match_its_md5_is_refused(
    served: tuple[DocumentAISim, str], tmp_path: Path
) -> None:
    sim, url = served
    async with httpx.AsyncClient() as client:
        api = _api(sim, url, client)
        job_id = await _finished(sim, api, "gs://in/a.pdf")
        status = await api.get_job(job_id)
        assert status.result is not None
        sim.garbled.add("results/77/0/a-0.json")
        with pytest.raises(ChecksumError):
            await api.write_result(job_id, status.result, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


async def test_a_gone_operation_is_not_found_and_a_foreign_key_gets_no_token(
    served: tuple[DocumentAISim, str],
) -> None:
    sim, url = served
    async with httpx.AsyncClient() as client:
        with pytest.raises(JobNotFoundError, match="not found"):
            await _api(sim, url, client).get_job("sim-project:us:404")
        foreign = _api(DocumentAISim(public_url=url), url, client)
        with pytest.raises(ProviderError, match="no access token"):
            await foreign.get_job("sim-project:us:404")


async def test_without_a_key_the_environments_default_credentials_are_used(
    served: tuple[DocumentAISim, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, url = served
    key = tmp_path / "adc.json"
    key.write_text(json.dumps(sim.service_account_key()))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    provider = get_provider("google-docai", table=GcpOptions(storage_url=url))
    async with httpx.AsyncClient() as client:
        api = GoogleJobAPI(source="g", provider=provider, base_url=url, api_key=Secret(""),
                           client=client, limiter=RateLimiter(6000.0, name="g"))  # fmt: skip
        with pytest.raises(JobNotFoundError):
            await api.get_job("sim-project:us:1")
    assert len(sim.tokens) == 1


async def test_shards_past_the_result_cap_stop_the_assembly_and_leave_no_file(
    served: tuple[DocumentAISim, str], tmp_path: Path
) -> None:
    sim, url = served
    options = GcpOptions(credentials=Secret(json.dumps(sim.service_account_key())),
                         storage_url=url, max_result_bytes=300)  # fmt: skip
    async with httpx.AsyncClient() as client:
        api = GoogleJobAPI(source="g", provider=get_provider("google-docai", table=options),
                           base_url=url, api_key=Secret(""), client=client,
                           limiter=RateLimiter(6000.0, name="g"))  # fmt: skip
        job_id = await _finished(sim, api, "gs://in/a.pdf")
        status = await api.get_job(job_id)
        assert status.result is not None
        with pytest.raises(ResultTooLargeError):
            await api.write_result(job_id, status.result, tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []


async def test_a_429_of_the_per_minute_quota_defers_the_budget_by_its_retry_after(
    served: tuple[DocumentAISim, str],
) -> None:
    sim, url = served
    sim.requests_per_minute = 1
    async with httpx.AsyncClient() as client:
        api = _api(sim, url, client)
        job_id = await _finished(sim, api, "gs://in/a.pdf")
        await api.get_job(job_id)
        with pytest.raises(ProviderError) as caught:
            await api.get_job(job_id)
    assert caught.value.retry_after == 60.0
    assert api.calls == {"200": 1, "429": 1}


@contextlib.asynccontextmanager
async def tls_in_front_of(port: int, cert: trustme.LeafCert) -> AsyncIterator[int]:
    """A loopback TLS endpoint (Google's are https) passing its bytes to the plain server on
    ``port``; yields its own port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    listener = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await listener.wait_closed()


async def test_the_token_is_refreshed_through_the_egress_proxy_trusting_its_ca(
    tmp_path: Path,
) -> None:
    """The token endpoint is reached as the job API is: through ``[egress]``'s proxy (the only
    way to docai.test here) and trusting its CA bundle (the only CA of that certificate)."""
    ca = trustme.CA()
    bundle = tmp_path / "corporate-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    port = free_port()
    async with tls_in_front_of(port, ca.issue_cert("docai.test")) as tls_port:
        url = f"https://docai.test:{tls_port}"
        sim = DocumentAISim(public_url=url, duration=0.0)
        async with live_server(sim.app(), port=port), connect_proxy() as proxy:
            egress = Egress(Secret(f"http://127.0.0.1:{proxy.port}"), ca_bundle=bundle)
            async with httpx.AsyncClient(**egress.client_options()) as client:
                with pytest.raises(JobNotFoundError):
                    await _api(sim, url, client).get_job("sim-project:us:404")
    assert len(sim.tokens) == 1
    assert set(proxy.targets) == {f"docai.test:{tls_port}"}
    assert [hit.path for hit in sim.hits][:1] == ["/token"]
