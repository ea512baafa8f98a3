"""Which result URLs are sent the API key: those under the job API's base, never a presigned
one (its query carries its own signature)."""

from __future__ import annotations

import httpx
import pytest

from receiver.providers import get_provider
from receiver.providers.base import presigned
from receiver.providers.jobapi import JobAPI
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret

BASE = "https://api.example.test"


def _api(client: httpx.AsyncClient) -> JobAPI:
    return JobAPI(source="r", provider=get_provider("reducto"), base_url=BASE + "/",
                  api_key=Secret("key-1"), client=client, limiter=RateLimiter(60))  # fmt: skip


@pytest.mark.parametrize(
    "query",
    ["X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a&X-Amz-Signature=f0",
     "sv=2024-11-04&se=2030-01-01&sp=r&sig=abc%3D", "X-Goog-Signature=ab&X-Goog-Expires=60",
     "Expires=1700000000&Signature=abc&Key-Pair-Id=K1", "x-amz-signature=lower"],
    ids=["s3", "azure-sas", "gcs", "cloudfront", "lower-case"],
)  # fmt: skip
async def test_a_presigned_url_under_the_api_base_gets_no_key(query: str) -> None:
    url = f"{BASE}/results/r1.json?{query}"
    assert presigned(url)
    async with httpx.AsyncClient() as client:
        assert _api(client).result_headers(url) == {}


async def test_an_unsigned_url_under_the_api_base_gets_the_key() -> None:
    url = f"{BASE}/v1/result/r1?format=json"
    assert not presigned(url)
    async with httpx.AsyncClient() as client:
        assert _api(client).result_headers(url) == {"Authorization": "Bearer key-1"}


async def test_a_url_elsewhere_gets_no_key() -> None:
    async with httpx.AsyncClient() as client:
        api = _api(client)
        assert api.result_headers("https://api.example.test.evil/x") == {}
        assert api.result_headers("https://cdn.example.test/x") == {}
