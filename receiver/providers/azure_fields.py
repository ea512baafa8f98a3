"""Azure AI Document Intelligence's fields: an ``analyzeResult`` whose ``documents[].fields``
map each name to a field with its ``confidence`` and ``content`` (or a typed ``value*``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from receiver.providers.base import number

if TYPE_CHECKING:
    from collections.abc import Iterator

    from receiver.providers.base import FieldReading


def document_fields(result: dict[str, Any]) -> Iterator[FieldReading]:
    """Every document's typed fields, as (name, confidence, value)."""
    documents = result.get("documents")
    for document in documents if isinstance(documents, list) else ():
        fields = document.get("fields") if isinstance(document, dict) else None
        for name, field in fields.items() if isinstance(fields, dict) else ():
            if isinstance(name, str) and isinstance(field, dict):
                yield name, number(field.get("confidence")), _value(field)


def _value(field: dict[str, Any]) -> str | None:
    if isinstance(field.get("content"), str):
        return str(field["content"])
    for key, value in field.items():
        if key.startswith("value") and value is not None:
            if isinstance(value, str):
                return value
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return None
