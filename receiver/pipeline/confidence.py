"""A job-level confidence: the least confident figure a provider reports for a result.

DocExtract answers ``"confidence": {"invoice_number": 0.98, "total": 0.91}``; the job's number is
the lowest of them (0.91), so ``min_confidence=0.9`` means "every field at least 0.9". A single
number, or a list, works the same; a result without a top-level ``confidence`` has none.
"""

from __future__ import annotations

import math
from typing import Any


def job_confidence(result: Any) -> float | None:
    """The lowest number under the result's top-level ``confidence`` key, or None."""
    if not isinstance(result, dict):
        return None
    return _lowest(result.get("confidence"), depth=0)


def _lowest(value: Any, depth: int) -> float | None:
    if isinstance(value, bool) or depth > 8:
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    children: list[Any]
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return None
    found = [n for child in children if (n := _lowest(child, depth + 1)) is not None]
    return min(found) if found else None
