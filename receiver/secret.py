"""Secret values: resolved once from a literal, ``env:NAME`` or ``file:PATH``; never printed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_HIDDEN: Final = "**********"


class Secret:
    """A secret string whose ``repr``/``str`` hide the value; call ``reveal()`` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one place that needs it (signing, an auth header)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({_HIDDEN!r})"

    def __str__(self) -> str:
        return _HIDDEN

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("Secret values are not picklable")


def resolve_secret(reference: str, environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """Turn ``env:NAME``, ``file:PATH`` or a literal into the secret's value.

    Raises ValueError with a message that never contains the value.
    """
    env = os.environ if environ is None else environ
    if reference.startswith("env:"):
        name = reference[4:]
        if not name:
            raise ValueError("'env:' needs a variable name, e.g. 'env:REDUCTO_WEBHOOK_SECRET'")
        value = env.get(name)
        if value is None or not value.strip():
            raise ValueError(
                f"environment variable {name} is not set or empty; export it before starting "
                "jobhook, or change the reference"
            )
        return value.strip()
    if reference.startswith("file:"):
        path = Path(reference[5:]).expanduser()
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(
                f"cannot read secret file {path}: {exc.strerror}; check the path and that "
                "jobhook's user may read it"
            ) from None
        except UnicodeDecodeError:
            raise ValueError(f"secret file {path} is not UTF-8 text") from None
        if not value:
            raise ValueError(f"secret file {path} is empty; write the secret into it")
        return value
    if not reference.strip():
        raise ValueError("the secret is empty")
    return reference
