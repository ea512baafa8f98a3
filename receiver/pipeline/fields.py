"""A result's extracted fields and their confidence, as each provider reports them.

- DocExtract: ``confidence`` maps each field to a number (0..1) and ``extracted_data`` holds the
  values: ``{"extracted_data": {"total": 1280.0}, "confidence": {"total": 0.91}}``.
- Reducto: each block of ``result.chunks[].blocks[]`` has a ``type`` and a ``confidence`` word
  (``"high"`` / ``"low"`` in its SDK's parse response, ``"medium"`` elsewhere in its API), or a
  number in ``granular_confidence.parse_confidence`` when numeric confidence is on. A block type
  is a field: its confidence is its least confident block's, words mapped by ``WORDS``.
- Textract: its own ``Confidence`` (0..100) of each form key (KEY_VALUE_SET blocks: the key's
  text names the field, the least of key and value confidence is its confidence), of each
  expense summary field (``ExpenseDocuments[].SummaryFields``) and of each lending field.
- DocuRift: ``fields`` holds values, with no confidence; Knowhere's result is a ZIP (no fields).
- Azure Document Intelligence: an ``analyzeResult`` whose ``documents[].fields`` map each name
  to a field with its ``confidence`` and ``content`` (or a typed ``value*``).
- Google Document AI: a ``Document`` whose ``entities[]`` have a ``type``, a ``confidence`` and
  a ``mentionText``; jobhook's assembly of a batch keeps each output shard's Document under
  ``documents[].shards[].document``. A name seen twice keeps its least confidence.
- Any other JSON result: a top-level ``confidence`` map, and values under ``extracted_data``
  or ``fields``.

At most ``MAX_FIELDS`` fields a job (confidence-bearing ones first, in the provider's order),
names at most ``MAX_NAME`` characters, values as text cut at ``MAX_VALUE`` characters.
"""

from __future__ import annotations

import json
import math
from typing import Any

from receiver.providers.textract import confidence_fields
from receiver.store.rows import FieldValue

MAX_FIELDS = 100
MAX_NAME = 200
MAX_VALUE = 1000
MAX_DEPTH = 4
WORDS = {"high": 0.95, "medium": 0.75, "low": 0.5}
"""Reducto's confidence words as numbers: ``low`` falls under the default 0.80 alert."""
VALUE_KEYS = ("extracted_data", "fields")


def extract_fields(result: Any) -> tuple[FieldValue, ...]:
    """The fields of a parsed JSON result, bounded; () when it has none."""
    if not isinstance(result, dict):
        return ()
    confidences: dict[str, float] = {}
    _numbers(result.get("confidence"), "", confidences, 0)
    for name, number in _blocks(result).items():
        confidences.setdefault(name, number)
    values: dict[str, str] = {}
    for name, number, text in confidence_fields(result):
        name = name[:MAX_NAME]
        if name not in confidences and len(confidences) >= MAX_FIELDS:
            continue
        confidences[name] = min(number, confidences.get(name, number))
        if text is not None:
            values.setdefault(name, text[:MAX_VALUE])
    for name, (typed, text) in _typed_fields(result).items():
        if typed is not None:
            confidences.setdefault(name, typed)
        if text is not None:
            values.setdefault(name, text)
    for key in VALUE_KEYS:
        found = result.get(key)
        if isinstance(found, dict):
            for name, value in found.items():
                if isinstance(name, str) and name and value is not None:
                    values.setdefault(name[:MAX_NAME], _text(value))
            break
    names = [*confidences, *(n for n in values if n not in confidences)][:MAX_FIELDS]
    return tuple(FieldValue(n, confidences.get(n), values.get(n)) for n in names)


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


def _blocks(result: dict[str, Any]) -> dict[str, float]:
    """Reducto: each block type's least confidence, over every chunk's blocks."""
    inner = result.get("result")
    chunks = (inner if isinstance(inner, dict) else result).get("chunks")
    found: dict[str, float] = {}
    if not isinstance(chunks, list):
        return found
    for chunk in chunks:
        blocks = chunk.get("blocks") if isinstance(chunk, dict) else None
        for block in blocks if isinstance(blocks, list) else ():
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                continue
            number = _block_confidence(block)
            if number is not None:
                name = block["type"][:MAX_NAME]
                found[name] = min(number, found.get(name, number))
    return found


def _typed_fields(result: dict[str, Any]) -> dict[str, tuple[float | None, str | None]]:
    """Azure's ``documents[].fields`` and Google's ``entities[]``: (least confidence, value)."""
    found: dict[str, tuple[float | None, str | None]] = {}

    def add(name: Any, number: float | None, text: str | None) -> None:
        if not isinstance(name, str) or not name or len(found) >= MAX_FIELDS:
            return
        name = name[:MAX_NAME]
        old_number, old_text = found.get(name, (None, None))
        if old_number is not None and (number is None or old_number < number):
            number = old_number
        found[name] = (number, old_text if old_text is not None else text)

    documents = result.get("documents")
    for document in documents if isinstance(documents, list) else ():
        if not isinstance(document, dict):
            continue
        fields = document.get("fields")
        if isinstance(fields, dict):
            for name, field in fields.items():
                if isinstance(field, dict):
                    add(name, _number(field.get("confidence")), _azure_value(field))
        shards = document.get("shards")
        for shard in shards if isinstance(shards, list) else ():
            inner = shard.get("document") if isinstance(shard, dict) else None
            if isinstance(inner, dict):
                for name, number, text in _entities(inner):
                    add(name, number, text)
    for name, number, text in _entities(result):
        add(name, number, text)
    return found


def _entities(document: dict[str, Any]) -> list[tuple[Any, float | None, str | None]]:
    entities = document.get("entities")
    return [
        (e.get("type"), _number(e.get("confidence")),
         _text(e["mentionText"]) if isinstance(e.get("mentionText"), str) else None)
        for e in (entities if isinstance(entities, list) else ())
        if isinstance(e, dict)
    ]  # fmt: skip


def _azure_value(field: dict[str, Any]) -> str | None:
    if isinstance(field.get("content"), str):
        return _text(field["content"])
    for key, value in field.items():
        if key.startswith("value") and value is not None:
            return _text(value)
    return None


def _block_confidence(block: dict[str, Any]) -> float | None:
    granular = block.get("granular_confidence")
    if isinstance(granular, dict):
        number = _number(granular.get("parse_confidence"))
        if number is not None:
            return number
    word = block.get("confidence")
    return WORDS.get(word.lower()) if isinstance(word, str) else None


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text[:MAX_VALUE]
