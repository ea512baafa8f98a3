"""The "Container" section (docs/deployment.md) names every setting's JOBHOOK_* variable."""

from __future__ import annotations

import re
import types
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from receiver.config.settings import HandlerSettings, Settings
from receiver.providers import PROVIDERS
from tests.deploy.dockerfile import REPO


def container_section() -> str:
    text = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    match = re.search(r"^## Container\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, 'docs/deployment.md has no "## Container" section followed by another section'
    return match[1]


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The settings models inside an annotation (``X``, ``X | None``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType, dict):
        return [model for arg in get_args(annotation) for model in _models(arg)]
    return []


def env_names(model: type[BaseModel] = Settings, prefix: str = "JOBHOOK_") -> list[str]:
    """The variable for every leaf setting; a table of named entries gets ``<NAME>``."""
    names: list[str] = []
    for field, info in model.model_fields.items():
        name = prefix + field.upper()
        if info.exclude:  # made by validation, not set (a source's provider table: below)
            continue
        if get_origin(info.annotation) is tuple and _models(get_args(info.annotation)[0]):
            names.append(name)  # a list of tables: set as a whole, in JSON
        elif get_origin(info.annotation) is dict and (inner := _models(info.annotation)):
            names += env_names(inner[0], f"{name}__<NAME>__")
        elif inner := _models(info.annotation):
            names += env_names(inner[0], f"{name}__")
        else:
            names.append(name)
    return names


def provider_table_names() -> list[str]:
    """The variables of every built-in provider's own table, ``[sources.NAME.<table_name>]``."""
    names: list[str] = []
    for provider in PROVIDERS.values():
        if provider.table_name and provider.table_model is not None:
            prefix = f"JOBHOOK_SOURCES__<NAME>__{provider.table_name.upper()}__"
            names += env_names(provider.table_model, prefix)
    return sorted(set(names))


@pytest.mark.parametrize("variable", env_names() + provider_table_names())
def test_every_setting_has_a_row_in_the_environment_table(variable: str) -> None:
    assert f"| `{variable}` |" in container_section()


@pytest.mark.parametrize("key", list(HandlerSettings.model_fields))
def test_every_handler_key_is_named_in_the_environment_table(key: str) -> None:
    row = next(
        line for line in container_section().splitlines() if line.startswith("| `JOBHOOK_HANDLERS`")
    )
    assert f"`{key}`" in row
