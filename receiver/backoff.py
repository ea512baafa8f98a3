"""Retry timing: exponential backoff with full jitter, and what servers say about waiting."""

from __future__ import annotations

import email.utils
import random
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

_rng = random.Random()


def backoff_delay(attempt: int, initial: float, maximum: float) -> float:
    """Delay before retry number ``attempt`` (1-based): uniform in [d/2, d], d = initial·2^(n-1).

    Half the delay is kept so a retry is never immediate, half is jitter so clients spread out.
    """
    ceiling: float = min(maximum, initial * 2.0 ** max(attempt - 1, 0))
    return ceiling / 2 + _rng.uniform(0, ceiling / 2)


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait, from Retry-After (seconds or date), retry-after-ms or RateLimit-Reset."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is not None:
        value = value.strip()
        try:
            return max(float(value), 0.0)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                current = time.time() if now is None else now
                return max(parsed.timestamp() - current, 0.0)
    return rate_limit_reset(headers, now=now)


def rate_limit_reset(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds until the window resets, from RateLimit-Reset or X-RateLimit-Reset.

    The IETF draft sends seconds; some APIs send a Unix time: large values are read as one.
    """
    for name in ("ratelimit-reset", "x-ratelimit-reset"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        if seconds > 1_000_000_000:
            seconds -= time.time() if now is None else now
        return max(seconds, 0.0)
    return None


def rate_limit_remaining(headers: Mapping[str, str]) -> tuple[int, int | None] | None:
    """(remaining, limit) from RateLimit-* or X-RateLimit-* headers, when present."""
    for prefix in ("ratelimit-", "x-ratelimit-"):
        remaining = headers.get(prefix + "remaining")
        if remaining is None:
            continue
        limit = headers.get(prefix + "limit")
        try:
            return int(remaining), int(limit) if limit is not None else None
        except ValueError:
            return None
    return None
