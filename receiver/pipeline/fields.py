"""A result's extracted fields and their confidence.

Every JSON result is read for a top-level ``confidence`` map (numbers 0..1, nested maps giving
dotted names) and values under ``extracted_data`` or ``fields``:
``{"extracted_data": {"total": 1280.0}, "confidence": {"total": 0.91}}``. A provider whose
result has a shape of its own (blocks, forms, typed document fields) reads it itself
(``Provider.result_fields``); a name seen twice keeps its least confidence.

At most ``MAX_FIELDS`` fields a job (confidence-bearing ones first, in the provider's order),
names at most ``MAX_NAME`` characters, values as text cut at ``MAX_VALUE`` characters.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import structlog

from receiver.store.rows import FieldValue

if TYPE_CHECKING:
    from receiver.providers.base import FieldReading, Provider

log = structlog.get_logger(__name__)

MAX_FIELDS = 100
MAX_NAME = 200
MAX_VALUE = 1000
MAX_DEPTH = 4
VALUE_KEYS = ("extracted_data", "fields")


def extract_fields(result: Any, provider: Provider | None = None) -> tuple[FieldValue, ...]:
    """The fields of a parsed JSON result, bounded; () when it has none. ``provider`` (the
    source's adapter) reads what its own result shape holds."""
    if not isinstance(result, dict):
        return ()
    confidences: dict[str, float] = {}
    _numbers(result.get("confidence"), "", confidences, 0)
    values: dict[str, str] = {}
    for name, number, text in _readings(result, provider):
        if not isinstance(name, str) or not name:
            continue
        name = name[:MAX_NAME]
        number = _number(number)
        known = name in confidences or name in values
        if not known and len(confidences) + len(values) >= 2 * MAX_FIELDS:
            continue
        if number is not None and (name in confidences or len(confidences) < MAX_FIELDS):
            confidences[name] = min(number, confidences.get(name, number))
        if isinstance(text, str):
            values.setdefault(name, text[:MAX_VALUE])
    for key in VALUE_KEYS:
        found = result.get(key)
        if isinstance(found, dict):
            for name, value in found.items():
                if isinstance(name, str) and name and value is not None:
                    values.setdefault(name[:MAX_NAME], _text(value))
            break
    names = [*confidences, *(n for n in values if n not in confidences)][:MAX_FIELDS]
    return tuple(FieldValue(n, confidences.get(n), values.get(n)) for n in names)


def _readings(result: dict[str, Any], provider: Provider | None) -> list[FieldReading]:
    """What ``provider`` reads of its result's own shape; none when its reader fails on a
    result it did not foresee (its fields are lost, the result and the completion are not)."""
    if provider is None:
        return []
    try:
        return list(provider.result_fields(result))
    except Exception as exc:  # a provider's code, a plugin's too: never fails the completion
        log.warning("result_fields_failed", provider=provider.name, error=type(exc).__name__)
        return []


def lowest(fields: tuple[FieldValue, ...]) -> float | None:
    """The least confidence among ``fields``, or None when none has one."""
    numbers = [f.confidence for f in fields if f.confidence is not None]
    return min(numbers) if numbers else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _numbers(value: Any, prefix: str, into: dict[str, float], depth: int) -> None:
    """A (nested) confidence map flattened to dotted names: ``{"a": {"b": 0.9}}`` is ``a.b``."""
    if not isinstance(value, dict) or depth > MAX_DEPTH:
        return
    for key, child in value.items():
        if len(into) >= MAX_FIELDS or not isinstance(key, str) or not key:
            continue
        name = f"{prefix}{key}"[:MAX_NAME]
        number = _number(child)
        if number is not None:
            into.setdefault(name, number)
        else:
            _numbers(child, f"{name}.", into, depth + 1)


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text[:MAX_VALUE]
