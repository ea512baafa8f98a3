"""A provider's own rules reach configuration through its declarations: its table (validated by
its model, errors at the key's path, whatever their type), its required keys, its API versions
and its ``check_source`` hook; the provider here is loaded as ``"module:attr"``, as a
third-party one may be."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticCustomError

from receiver.config.load import load_settings
from receiver.errors import ConfigError
from receiver.models import State
from receiver.providers.base import Provider

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class LabTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    bench: str = "a"

    @field_validator("bench")
    @classmethod
    def _one_letter(cls, value: str) -> str:
        if len(value) != 1:
            raise PydanticCustomError("bench_name", "a bench is one letter, like {example}")
        return value


class Lab(Provider):
    name = "lab"
    status_words: ClassVar[Mapping[str, State]] = {"done": State.SUCCEEDED}
    table_name = "lab"
    table_model = LabTable
    api_versions = ("v3", "v2")
    required_keys: ClassVar[Mapping[str, str]] = {"api_base_url": "the lab's API"}

    @classmethod
    def check_source(cls, keys: Mapping[str, object], table: BaseModel | None) -> None:
        super().check_source(keys, table)
        if keys.get("webhook_mode") == "direct":
            raise ValueError("provider 'lab' signs every webhook: no direct mode")


def _load(tmp_path: Path, source: str, table: str = "") -> Any:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[sources.s]\nprovider = "{__name__}:Lab"\n'
        f'secrets = ["{SECRET}"]\n{source}\n{table}',
        encoding="utf-8",
    )
    return load_settings(config, environ={})


def _error(tmp_path: Path, source: str, table: str = "") -> str:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, source, table)
    return str(info.value)


def test_the_table_and_the_api_version_reach_the_source(tmp_path: Path) -> None:
    source = _load(tmp_path, 'api_base_url = "https://lab.test"\napi_version = "v2"',
                   '[sources.s.lab]\nbench = "c"\n').sources["s"]  # fmt: skip
    assert (source.table, source.api_version) == (LabTable(bench="c"), "v2")


def test_a_tables_own_error_type_is_reported_at_its_key(tmp_path: Path) -> None:
    message = _error(tmp_path, 'api_base_url = "https://lab.test"', '[sources.s.lab]\nbench = "cd"')
    assert "sources.s.lab.bench: a bench is one letter" in message


def test_a_required_key_is_named_with_what_it_holds(tmp_path: Path) -> None:
    assert "provider 'lab' needs api_base_url (the lab's API)" in _error(tmp_path, "")


def test_the_providers_own_rule_is_checked(tmp_path: Path) -> None:
    source = 'api_base_url = "https://lab.test"\nwebhook_mode = "direct"'
    assert "provider 'lab' signs every webhook" in _error(tmp_path, source)


def test_an_api_version_it_does_not_speak_is_refused_at_its_key(tmp_path: Path) -> None:
    message = _error(tmp_path, 'api_base_url = "https://lab.test"\napi_version = "v1"')
    assert "sources.s.api_version: provider 'lab' speaks api_version v3 or v2" in message


def test_a_key_named_table_is_not_a_way_in(tmp_path: Path) -> None:
    message = _error(tmp_path, 'api_base_url = "https://lab.test"\ntable = { bench = "c" }')
    assert "sources.s.table: unknown key" in message
