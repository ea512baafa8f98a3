"""Retry timing: exponential backoff with full jitter, and what servers say about waiting."""

from __future__ import annotations

import email.utils
import math
import random
import time
from datetime import UTC
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


MAX_WAIT = 3600.0
"""The longest any server's word makes us wait (a cap, whatever it says)."""


def seconds_from(
    value: str | None, *, now: float | None = None, cap: float = MAX_WAIT
) -> float | None:
    """One Retry-After-like value in seconds, in [0, ``cap``]; None when absent or unreadable.

    Delta-seconds (a finite, non-negative number) or an HTTP date (one in the past is 0).
    ``inf``, ``nan``, negative numbers, words and empty values are unreadable: the caller's own
    backoff applies instead of stalling forever or failing.
    """
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > 64:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
        return capped(max(seconds, 0.0), cap)
    if seconds < 0:
        return None
    return capped(seconds, cap)


def capped(seconds: float | None, cap: float = MAX_WAIT) -> float | None:
    """``seconds`` within [0, ``cap``]; None for None and for what is not a finite number."""
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), cap)


def retry_after(
    headers: Mapping[str, str], *, now: float | None = None, cap: float = MAX_WAIT
) -> float | None:
    """Seconds to wait, from Retry-After (seconds or date), retry-after-ms or RateLimit-Reset."""
    ms = seconds_from(headers.get("retry-after-ms"), cap=cap * 1000)
    if ms is not None:
        return ms / 1000
    seconds = seconds_from(headers.get("retry-after"), now=now, cap=cap)
    if seconds is not None:
        return seconds
    return rate_limit_reset(headers, now=now, cap=cap)


def rate_limit_reset(
    headers: Mapping[str, str], *, now: float | None = None, cap: float = MAX_WAIT
) -> float | None:
    """Seconds until the window resets, from RateLimit-Reset or X-RateLimit-Reset.

    The IETF draft sends seconds; some APIs send a Unix time: large values are read as one.
    """
    for name in ("ratelimit-reset", "x-ratelimit-reset"):
        seconds = seconds_from(headers.get(name), cap=math.inf)
        if seconds is None:
            continue
        if seconds > 1_000_000_000:
            seconds -= time.time() if now is None else now
        return capped(seconds, cap)
    return None


def rate_limit_remaining(headers: Mapping[str, str]) -> tuple[int, int | None] | None:
    """(remaining, limit) from RateLimit-* or X-RateLimit-* headers, when readable."""
    for prefix in ("ratelimit-", "x-ratelimit-"):
        remaining = _count(headers.get(prefix + "remaining"))
        if remaining is None:
            continue
        return remaining, rate_limit_limit(headers)
    return None


def rate_limit_limit(headers: Mapping[str, str]) -> int | None:
    """The window's request limit, from RateLimit-Limit or X-RateLimit-Limit, when readable.

    The IETF draft allows a policy after the number (``100, 100;w=60``): the first number counts.
    """
    for name in ("ratelimit-limit", "x-ratelimit-limit"):
        limit = _count(headers.get(name))
        if limit is not None:
            return limit
    return None


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    first = value.split(",", 1)[0].split(";", 1)[0].strip()
    if not first.isascii() or not first.isdigit() or len(first) > 12:
        return None
    return int(first)
