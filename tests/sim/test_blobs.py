"""Results behind presigned URLs: valid, then 403 once expired; big blobs streamed and hashed."""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
import zipfile
from typing import Any

import httpx
import psutil
import pytest

from receiver.sim import ManualClock, Simulator, build_app
from receiver.sim.blobs import BlobSpec, chunks
from tests.sim.helpers import API_KEY, auth
from tests.support import live_server

MiB = 1 << 20


async def _finished(provider: str, clock: ManualClock, **options: object) -> tuple[Simulator, str]:
    sim = Simulator(provider, api_key=API_KEY, clock=clock, **options)
    result = "url" if provider == "reducto" else None
    (job_id,) = sim.create_jobs(duration=1, result=result)
    clock.advance(1)
    return sim, job_id


def _url(provider: str, body: dict[str, Any]) -> str:
    url = body["result"]["result"]["url"] if provider == "reducto" else body["result_url"]
    assert isinstance(url, str)
    return url


async def _read(client: httpx.AsyncClient, url: str, sizes: list[int]) -> None:
    async with client.stream("GET", url) as response:
        async for chunk in response.aiter_raw():
            sizes.append(len(chunk))


@pytest.mark.parametrize(
    ("provider", "path"), [("reducto", "/job/{}"), ("knowhere", "/v1/jobs/{}")]
)
async def test_presigned_url_works_then_403_after_expiry_and_a_fresh_one_is_minted(
    provider: str, path: str
) -> None:
    clock = ManualClock()
    sim, job_id = await _finished(provider, clock, url_ttl=60, result_bytes=5000)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient() as client:
        first = _url(
            provider, (await client.get(base + path.format(job_id), headers=auth(provider))).json()
        )
        fetched = await client.get(first)
        clock.advance(61)
        expired = await client.get(first)
        second = _url(
            provider, (await client.get(base + path.format(job_id), headers=auth(provider))).json()
        )
        refetched = await client.get(second)
    assert first.startswith(f"{base}/blobs/")
    assert fetched.status_code == 200
    assert expired.status_code == 403
    assert "<Code>AccessDenied</Code>" in expired.text
    assert "Request has expired" in expired.text
    assert second != first
    assert refetched.status_code == 200
    assert refetched.content == fetched.content


async def test_reducto_url_result_is_json_of_the_configured_size() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("reducto", clock, result_bytes=300_000)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient() as client:
        body = (await client.get(f"{base}/job/{job_id}", headers=auth("reducto"))).json()
        blob = await client.get(_url("reducto", body))
    assert blob.headers["content-type"] == "application/json"
    assert len(blob.content) == 300_000
    assert json.loads(blob.content)["type"] == "full"


async def test_knowhere_result_is_a_valid_zip_matching_its_checksum() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("knowhere", clock, result_bytes=20_000)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient() as client:
        body = (await client.get(f"{base}/v1/jobs/{job_id}", headers=auth("knowhere"))).json()
        blob = await client.get(body["result_url"])
    archive = zipfile.ZipFile(io.BytesIO(blob.content))
    assert archive.testzip() is None
    assert json.loads(archive.read("result.json"))["type"] == "full"
    checksum = {"algorithm": "sha256", "value": hashlib.sha256(blob.content).hexdigest()}
    assert body["result_checksum"] == checksum


async def test_tampered_or_unknown_blob_urls_are_refused_like_s3() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("knowhere", clock)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient() as client:
        body = (await client.get(f"{base}/v1/jobs/{job_id}", headers=auth("knowhere"))).json()
        url = body["result_url"]
        tampered = await client.get(url[:-4] + ("0000" if not url.endswith("0000") else "1111"))
        later = url.replace("expires=", "expires=9")
        stretched = await client.get(later)
        unknown = await client.get(sim.blobs.presign(base, "res_unknown").url)
    assert (tampered.status_code, stretched.status_code) == (403, 403)
    assert "SignatureDoesNotMatch" in tampered.text
    assert unknown.status_code == 404
    assert "NoSuchKey" in unknown.text


async def test_large_blob_streams_with_the_reported_sha256() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("knowhere", clock, result_bytes=48 * MiB)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient(timeout=30) as client:
        body = (await client.get(f"{base}/v1/jobs/{job_id}", headers=auth("knowhere"))).json()
        digest, size = hashlib.sha256(), 0
        async with client.stream("GET", body["result_url"]) as response:
            declared = int(response.headers["content-length"])
            async for chunk in response.aiter_raw():
                digest.update(chunk)
                size += len(chunk)
    assert size == declared > 48 * MiB
    assert digest.hexdigest() == body["result_checksum"]["value"]


@pytest.mark.slow
async def test_gibibyte_blob_is_streamed_without_growing_memory() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("reducto", clock, result_bytes=1024 * MiB)
    process = psutil.Process()
    async with live_server(build_app(sim)) as base, httpx.AsyncClient(timeout=30) as client:
        body = (await client.get(f"{base}/job/{job_id}", headers=auth("reducto"))).json()
        before = process.memory_info().rss
        size = 0
        async with client.stream("GET", _url("reducto", body)) as response:
            async for chunk in response.aiter_raw():
                size += len(chunk)
        grew = process.memory_info().rss - before
    assert size == 1024 * MiB
    assert grew < 128 * MiB


@pytest.mark.parametrize("kind", ["json", "zip"])
def test_blob_generation_holds_about_one_chunk_in_memory(kind: str) -> None:
    tracemalloc.start()
    try:
        total = sum(len(chunk) for chunk in chunks(BlobSpec(kind, 64 * MiB)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total >= 64 * MiB
    assert peak < 4 * MiB


async def test_blob_faults_fail_or_cut_the_download_short() -> None:
    clock = ManualClock()
    sim, job_id = await _finished("knowhere", clock, result_bytes=4 * MiB)
    sim.inject(target="blobs", status=500)
    sim.inject(target="blobs", truncate=1000)
    async with live_server(build_app(sim)) as base, httpx.AsyncClient() as client:
        body = (await client.get(f"{base}/v1/jobs/{job_id}", headers=auth("knowhere"))).json()
        failed = await client.get(body["result_url"])
        received: list[int] = []
        with pytest.raises(httpx.RemoteProtocolError):
            await _read(client, body["result_url"], received)
        whole = await client.get(body["result_url"])
    assert failed.status_code == 500
    assert sum(received) == 1000
    assert whole.status_code == 200
    assert [e.reason for e in sim.log.entries(path="/blobs/")] == ["fault", "fault", "ok"]
