"""JSON Pointers (RFC 6901): checked once when the configuration is read, resolved per body."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

_BAD_ESCAPE = re.compile(r"~(?![01])")
_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""What ``Pointer.resolve`` answers when the pointed-to value does not exist."""


@dataclass(frozen=True, slots=True)
class Pointer:
    """A parsed pointer; ``Pointer.parse("")`` is the whole document."""

    text: str
    tokens: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Pointer:
        """Parse ``text``; ValueError says what is wrong with it."""
        if text == "":
            return cls(text, ())
        if not text.startswith("/"):
            raise ValueError(f"JSON pointer {text!r} must be empty or start with '/'")
        if _BAD_ESCAPE.search(text):
            raise ValueError(f"JSON pointer {text!r} has a '~' not followed by 0 or 1")
        tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/"))
        return cls(text, tokens)

    def resolve(self, document: Any) -> Any:
        """The value the pointer names in ``document``, or MISSING."""
        node = document
        for token in self.tokens:
            if isinstance(node, dict):
                if token not in node:
                    return MISSING
                node = node[token]
            elif isinstance(node, list):
                if not _INDEX.match(token) or int(token) >= len(node):
                    return MISSING
                node = node[int(token)]
            else:
                return MISSING
        return node

    def __str__(self) -> str:
        return self.text
