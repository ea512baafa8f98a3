"""A provider's odd or hostile Retry-After on a 429: a provider error with a finite wait, never
a parser exception or a budget stalled forever."""

from __future__ import annotations

import math

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver.backoff import MAX_WAIT
from receiver.errors import ProviderError
from receiver.providers import get_provider
from receiver.providers.jobapi import JobAPI
from receiver.providers.ratelimit import RateLimiter
from receiver.secret import Secret
from tests.providers.test_ratelimit import FakeTime
from tests.support import live_server

ODD = {
    "inf": "inf",
    "nan": "nan",
    "negative": "-30",
    "huge": "1" + "0" * 40,
    "past date": "Wed, 21 Oct 2015 07:28:00 GMT",
    "word": "soon",
    "empty": "",
}


@pytest.mark.parametrize("form", ODD.values(), ids=ODD.keys())
async def test_an_odd_retry_after_is_a_provider_error_with_a_finite_wait(form: str) -> None:
    async def limited(request: Request) -> JSONResponse:
        return JSONResponse({"detail": "slow down"}, 429, headers={"Retry-After": form})

    app = Starlette(routes=[Route("/job/{job_id}", limited)])
    t = FakeTime()
    limiter = RateLimiter(600, clock=t.clock, sleep=t.sleep)
    async with live_server(app) as url, httpx.AsyncClient() as client:
        api = JobAPI(source="reducto", provider=get_provider("reducto"), base_url=url,
                     api_key=Secret("key"), client=client, limiter=limiter)  # fmt: skip
        with pytest.raises(ProviderError, match="429") as caught:
            await api.get_job("job-1")
        wait = caught.value.retry_after
        assert wait is None or (math.isfinite(wait) and 0 <= wait <= MAX_WAIT)
        await limiter.acquire()  # the next request's slot is finite and capped
    assert t.sleeps
    assert all(0 < s <= MAX_WAIT + 1 for s in t.sleeps)


def test_a_limiter_told_to_wait_forever_waits_at_most_the_cap() -> None:
    t = FakeTime()
    limiter = RateLimiter(60, clock=t.clock, sleep=t.sleep)
    limiter.defer(math.inf)
    limiter.defer(math.nan)
    limiter.defer(10**12)
    assert t.now < limiter._next <= t.now + MAX_WAIT
