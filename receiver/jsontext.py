"""Compact JSON text on the hot paths: orjson, with the standard library for what it refuses."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from collections.abc import Callable


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``value`` as compact JSON text.

    orjson is about three times faster than ``json.dumps`` and writes non-ASCII characters as
    they are; what it refuses (integers wider than 64 bits, non-string keys, strings with lone
    surrogates) goes through ``json.dumps``, which escapes every non-ASCII character as
    ``\\uXXXX`` (a lone surrogate has no UTF-8 form to store).
    """
    try:
        return orjson.dumps(value, default=default).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, default=default, separators=(",", ":"))
