"""Google Document AI's fields: a ``Document`` whose ``entities[]`` have a ``type``, a
``confidence`` and a ``mentionText``; jobhook's assembly of a batch keeps each output shard's
Document under ``documents[].shards[].document``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from receiver.providers.base import number

if TYPE_CHECKING:
    from collections.abc import Iterator

    from receiver.providers.base import FieldReading


def document_entities(result: dict[str, Any]) -> Iterator[FieldReading]:
    """The entities of every assembled shard, then of a single Document, as (name,
    confidence, value); a name seen twice keeps its least confidence where it is read."""
    documents = result.get("documents")
    for document in documents if isinstance(documents, list) else ():
        shards = document.get("shards") if isinstance(document, dict) else None
        for shard in shards if isinstance(shards, list) else ():
            inner = shard.get("document") if isinstance(shard, dict) else None
            if isinstance(inner, dict):
                yield from _entities(inner)
    yield from _entities(result)


def _entities(document: dict[str, Any]) -> Iterator[FieldReading]:
    entities = document.get("entities")
    for entity in entities if isinstance(entities, list) else ():
        if isinstance(entity, dict) and isinstance(entity.get("type"), str):
            text = entity.get("mentionText")
            yield (
                entity["type"],
                number(entity.get("confidence")),
                text if isinstance(text, str) else None,
            )
