"""Built-in handlers' options: one frozen pydantic model per handler, checked like the config.

Each built-in handler class names its model in ``options_model`` and builds itself from
``Model.parse(options)``; a bad option is a ValueError that reads like a config error, the key
and the problem (``dir: required, and missing; add it``, ``timeout: must be a positive number
of seconds``, ``dirr: unknown key; did you mean 'dir'?``), never a secret's value. The loader
prefixes it with the handler (``handler 'archive' (file): dir: required, and missing; add
it``). Plugin handlers need no model: they are still called with the entry's keys as keyword
arguments.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from handlers.base import BUILTINS
from receiver.config.problems import error_lines
from receiver.config.settings import SecretValue
from receiver.importer import import_from_string

SECRET_SCHEMA = {"type": "string", "description": "a literal, 'env:NAME' or 'file:PATH'"}


def _positive_seconds(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError("must be a positive number of seconds")
    return value


Seconds = Annotated[float, Field(gt=0), BeforeValidator(_positive_seconds)]
SecretText = Annotated[SecretValue, WithJsonSchema(SECRET_SCHEMA)]
SECRET_TABLE = WithJsonSchema({"type": "object", "additionalProperties": SECRET_SCHEMA})
"""The schema of a table of names to values that may be secrets (headers, env)."""
"""A literal, ``env:NAME`` or ``file:PATH``, resolved once and kept hidden (``Secret``)."""
NonEmpty = Annotated[str, Field(min_length=1)]
STRINGS_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
"""The schema of an option that takes one string or a list of them."""


class HandlerOptions(BaseModel):
    """The options of one built-in handler type: unknown keys are refused, values frozen."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True
    )

    @classmethod
    def parse(cls, options: dict[str, Any]) -> Self:
        """``options`` checked; ValueError with each problem on its own line, ``key: message``."""
        try:
            return cls.model_validate(options)
        except ValidationError as exc:
            raise ValueError("\n".join(error_lines(exc, cls))) from None


def option_schemas() -> dict[str, dict[str, Any]]:
    """The JSON schema of each built-in handler type's options, by type name."""
    schemas = {}
    for kind, spec in sorted(BUILTINS.items()):
        model: type[HandlerOptions] = import_from_string(spec).options_model
        schemas[kind] = model.model_json_schema()
    return schemas
