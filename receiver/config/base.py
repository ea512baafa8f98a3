"""What every settings section is made of: a frozen model that refuses unknown keys, and
secrets that may be a literal, ``env:NAME`` or ``file:PATH`` and never print their value."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo

from receiver.secret import Secret, resolve_secret


def _to_secret(value: object, info: ValidationInfo) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string: a literal, 'env:NAME' or 'file:PATH'")
    env = info.context.get("env") if isinstance(info.context, dict) else None
    return Secret(resolve_secret(value, env))


SecretValue = Annotated[Secret, BeforeValidator(_to_secret)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
