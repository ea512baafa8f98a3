"""How a settings problem reads: one line, ``key.path: what is wrong; how to fix it``.

pydantic's sentences ("Extra inputs are not permitted", "Input should be a valid integer") are
rewritten into that form here, once: a list's entries are counted from 1 (``secrets #1``), an
unknown key gets a did-you-mean from the keys its table
takes, a value that came from a ``JOBHOOK_*`` variable names the variable, and no line ever
shows the value itself (it may be a secret).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import TYPE_CHECKING, Any, Union

from pydantic import BaseModel

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

Loc = tuple[str | int, ...]


def config_error(where: str, lines: Iterable[str]) -> ConfigError:
    """One ConfigError whose message is a heading and each problem on its own indented line."""
    return ConfigError("\n  ".join([f"invalid {where}:", *lines]))


def error_lines(
    exc: ValidationError,
    model: type[BaseModel] | None = None,
    env_names: Mapping[tuple[str, ...], str] | None = None,
) -> list[str]:
    """Each problem as ``key.path: message``, never the value.

    ``model`` (the validated class) lets an unknown key suggest a known one; ``env_names`` maps
    a key path to the ``JOBHOOK_*`` variable that set it, so the line blames the variable.
    """
    errors = exc.errors(include_input=False, include_url=False)
    suggested = {_loc(e)[:-1] for e in errors if _suggestion(e, model) in {"secrets"}}
    lines = []
    for error in errors:
        loc = _loc(error)
        if error["type"] == "value_error" and loc[:-1] in suggested and loc[-1:] == ("secrets",):
            continue  # "secret = [...]" already says "did you mean 'secrets'?"
        key = key_path(loc)
        variable = _variable(loc, env_names or {})
        if variable is not None:
            key = f"{variable} ({key})"
        message = _message(error, model, from_env=variable is not None)
        if variable is not None:
            message += f"; fix or unset {variable}"
        lines.append(f"{key}: {message}")
    return lines


def key_path(loc: Loc) -> str:
    """A key as a user reads it: ``handlers #2.dir``, ``sources.reducto.secrets #1`` (a list's
    entries are counted from 1, as a person counts them)."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f" #{part + 1}"
        else:
            text += f".{part}" if text else part
    return text or "(top level)"


def _loc(error: ErrorDetails) -> Loc:
    return tuple(error["loc"])


def _variable(loc: Loc, env_names: Mapping[tuple[str, ...], str]) -> str | None:
    parts = tuple(str(part) for part in loc)
    for size in range(len(parts), 0, -1):
        if parts[:size] in env_names:
            return env_names[parts[:size]]
    return None


def _message(error: ErrorDetails, model: type[BaseModel] | None, *, from_env: bool) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        known = _keys_at(model, _loc(error)[:-1])
        guess = _suggestion(error, model)
        if guess is not None:
            return f"unknown key; did you mean {guess!r}?"
        if known:
            return f"unknown key; this table takes {', '.join(sorted(known))}"
        return "unknown key; remove it"
    if kind == "missing":
        return "required, and missing; add it"
    message = error["msg"].removeprefix("Value error, ")
    if kind in {"tuple_type", "list_type"}:
        return 'must be a list, e.g. ["a", "b"]'
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return "must be a table ([section] or { key = value })"
    if message.startswith("Input should be "):
        message = "must be " + message.removeprefix("Input should be ")
    numbers = {"int_parsing", "float_parsing", "bool_parsing", "int_type", "float_type"}
    if kind in numbers and not from_env:
        message += " (TOML numbers and booleans take no quotes)"
    return message


def _suggestion(error: ErrorDetails, model: type[BaseModel] | None) -> str | None:
    if error["type"] != "extra_forbidden":
        return None
    loc = _loc(error)
    known = _keys_at(model, loc[:-1])
    matches = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return matches[0] if matches else None


def _keys_at(model: type[BaseModel] | None, loc: Loc) -> list[str]:
    """The keys the table at ``loc`` takes, found by walking the model's field types."""
    annotation: Any = model
    parts = list(loc)
    while parts:
        annotation = _unwrap(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            key = str(parts.pop(0))
            field = annotation.model_fields.get(key)
            if field is not None:
                annotation = field.annotation
                continue
            # A table read by a model of its own (a provider's [sources.NAME.TABLE]).
            sub_table = getattr(annotation, "sub_table", None)
            annotation = sub_table(key) if callable(sub_table) else None
            if annotation is None:
                return []
        elif origin in (dict, tuple, list):
            parts.pop(0)  # a table's name or a list's index
            annotation = typing.get_args(annotation)[-1 if origin is dict else 0]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """``X | None`` -> ``X``; ``Annotated[X, ...]`` -> ``X``."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif typing.get_origin(annotation) in (Union, types.UnionType):
            args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation
