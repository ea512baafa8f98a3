"""What every settings section is made of: a frozen model that refuses unknown keys, and
secrets that may be a literal, ``env:NAME`` or ``file:PATH`` and never print their value."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo

from receiver.secret import Secret, resolve_secret

VARIABLE_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
"""An environment variable's name (``REDUCTO_WEBHOOK_SECRET``): no provider's secret, key or
token looks like one, so such a literal is taken for a forgotten ``env:``."""


def _to_secret(value: object, info: ValidationInfo) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string: a literal, 'env:NAME' or 'file:PATH'")
    if VARIABLE_NAME.fullmatch(value.strip()):
        raise ValueError(
            f"{value.strip()} is an environment variable's name, not a secret; did you mean "
            f"'env:{value.strip()}'?"
        )
    env = info.context.get("env") if isinstance(info.context, dict) else None
    return Secret(resolve_secret(value, env))


SecretValue = Annotated[Secret, BeforeValidator(_to_secret)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
