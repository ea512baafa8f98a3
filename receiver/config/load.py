"""Where settings come from: a TOML file (or none), then JOBHOOK_* variables over it.

``load_settings`` is the one way in; every problem becomes one ConfigError naming each bad key.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from receiver.config.problems import config_error, error_lines
from receiver.config.settings import DEFAULT_CONFIG, ENV_PREFIX, Settings
from receiver.errors import ConfigError

__all__ = ["RawConfig", "load_settings", "read_config", "read_toml"]


@dataclass(frozen=True)
class RawConfig:
    """The configuration as read and merged, before validation (``where`` names it in errors)."""

    data: dict[str, Any]
    env: dict[str, str]
    env_names: dict[tuple[str, ...], str]
    where: str

    def validate(self) -> tuple[Settings | None, list[str]]:
        """The settings, or None and every problem, one line each."""
        try:
            return Settings.model_validate(self.data, context={"env": self.env}), []
        except ValidationError as exc:
            return None, error_lines(exc, Settings, self.env_names)


def read_config(path: Path | None = None, environ: dict[str, str] | None = None) -> RawConfig:
    """Read the file (or none) and apply the ``JOBHOOK_*`` variables; ConfigError when the file
    cannot be read or parsed."""
    env = dict(os.environ) if environ is None else environ
    if path is None and env.get("JOBHOOK_CONFIG"):
        path = Path(env["JOBHOOK_CONFIG"])
    if path is None and DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    data: dict[str, Any] = _read_toml(path) if path is not None else _zero_config(env)
    env_names = _apply_env_overrides(data, env)
    return RawConfig(
        data, env, env_names, f"config {path}" if path is not None else "configuration"
    )


def load_settings(path: Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Read, merge and validate the configuration; ConfigError names every bad key."""
    raw = read_config(path, environ)
    settings, problems = raw.validate()
    if settings is None:
        raise config_error(raw.where, problems)
    return settings


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML file as read, before any check; ConfigError when it cannot be read or parsed."""
    return _read_toml(path)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _zero_config(env: dict[str, str]) -> dict[str, Any]:
    """No file: one Reducto source when REDUCTO_WEBHOOK_SECRET is set, else no source at all."""
    data_dir = env.get("JOBHOOK_DATA_DIR", "data")
    data: dict[str, Any] = {
        "handlers": [{"name": "files", "type": "file", "dir": f"{data_dir}/out"}],
    }
    if env.get("REDUCTO_WEBHOOK_SECRET"):
        source: dict[str, Any] = {
            "provider": "reducto",
            "secrets": ["env:REDUCTO_WEBHOOK_SECRET"],
        }
        if env.get("REDUCTO_API_KEY"):
            source["api_key"] = "env:REDUCTO_API_KEY"
            source["api_base_url"] = env.get("REDUCTO_API_BASE_URL", "https://platform.reducto.ai")
        data["sources"] = {"reducto": source}
    return data


def _apply_env_overrides(data: dict[str, Any], env: dict[str, str]) -> dict[tuple[str, ...], str]:
    """``JOBHOOK_SERVER__PORT=9000`` sets ``server.port``; JSON values for lists and tables.

    Returns which variable set each key path, so an error blames the variable, not the file.
    """
    top = set(Settings.model_fields)
    names: dict[tuple[str, ...], str] = {}
    for key in sorted(env):
        if not key.startswith(ENV_PREFIX):
            continue
        path = key[len(ENV_PREFIX) :].lower().split("__")
        if path[0] not in top or (len(path) == 1 and path[0] in {"server", "store", "results"}):
            continue
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{key}: {'.'.join(path[:-1])} is not a table")
            node = child
        node[path[-1]] = _env_value(env[key])
        names[tuple(path)] = key
    return names


def _env_value(raw: str) -> Any:
    if raw[:1] in "[{":
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw
