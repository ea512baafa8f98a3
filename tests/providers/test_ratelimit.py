"""The per-source request budget: even spacing, 429 deferral, slowing down on low quota."""

from __future__ import annotations

import itertools

from receiver.backoff import backoff_delay, retry_after
from receiver.providers.ratelimit import RateLimiter


class FakeTime:
    """A clock that only moves when the limiter sleeps (both are the limiter's own seams)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_requests_are_spaced_to_stay_within_the_budget() -> None:
    t = FakeTime()
    limiter = RateLimiter(60, clock=t.clock, sleep=t.sleep)
    times = []
    for _ in range(61):
        await limiter.acquire()
        times.append(t.now)
    in_first_minute = [x for x in times if x < times[0] + 60]
    assert len(in_first_minute) <= 60
    assert min(b - a for a, b in itertools.pairwise(times)) >= 1.0


async def test_defer_pushes_the_next_request_past_retry_after() -> None:
    t = FakeTime()
    limiter = RateLimiter(600, clock=t.clock, sleep=t.sleep)
    await limiter.acquire()
    limiter.defer(12.0)
    await limiter.acquire()
    assert t.now >= 1000.0 + 12.0


async def test_low_remaining_quota_spreads_the_rest_of_the_window() -> None:
    t = FakeTime()
    limiter = RateLimiter(600, clock=t.clock, sleep=t.sleep)
    await limiter.acquire()
    limiter.observe({"ratelimit-limit": "60", "ratelimit-remaining": "2", "ratelimit-reset": "30"})
    await limiter.acquire()
    assert t.now - 1000.0 >= 15.0  # 30 s left for 2 requests: one every 15 s


async def test_plenty_of_quota_does_not_slow_down() -> None:
    t = FakeTime()
    limiter = RateLimiter(600, clock=t.clock, sleep=t.sleep)
    await limiter.acquire()
    limiter.observe({"ratelimit-limit": "60", "ratelimit-remaining": "50", "ratelimit-reset": "30"})
    await limiter.acquire()
    assert t.now - 1000.0 < 0.2


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "1500"}) == 1.5
    assert retry_after({"ratelimit-reset": "4"}) == 4.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert retry_after({}) is None


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    delays = [backoff_delay(n, 1.0, 8.0) for n in range(1, 8)]
    assert 0.5 <= delays[0] <= 1.0
    assert 1.0 <= delays[1] <= 2.0
    assert all(4.0 <= d <= 8.0 for d in delays[4:])
