"""Request bodies' OpenAPI schemas, from the pydantic models that validate them.

Pydantic writes JSON Schema (2020-12); the document is OpenAPI 3.0, so optional fields become
``nullable`` instead of ``anyOf`` with a null type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

Json = dict[str, Any]


def model_schemas(*models: type[BaseModel]) -> Json:
    """The models' JSON schemas (and their ``$defs``) as OpenAPI 3.0 components."""
    schemas: Json = {}
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return {name: _openapi30(schema) for name, schema in schemas.items()}


def _openapi30(node: Any) -> Any:
    """JSON Schema's ``anyOf: [X, {type: null}]`` as OpenAPI 3.0's ``X`` + ``nullable``."""
    if isinstance(node, list):
        return [_openapi30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _openapi30(value) for key, value in node.items()}
    options = node.get("anyOf", [])
    if {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del node["anyOf"]
        node.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
        node["nullable"] = True
    return node
