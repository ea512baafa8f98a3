"""The CLI's configuration commands: clear errors, exit codes, nothing secret printed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from click.testing import CliRunner

from receiver.cli.main import main
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path


def _config(tmp_path: Path, handler: str) -> str:
    path = tmp_path / "jobhook.toml"
    path.write_text(
        f'data_dir = "{tmp_path}"\n[server]\nport = 0\n[sources.reducto]\nprovider = "reducto"\n'
        f'secrets = ["{SECRET}"]\n{handler}'
    )
    return str(path)


def test_check_config_accepts_a_good_config(tmp_path: Path) -> None:
    config = _config(tmp_path, '[[handlers]]\nname = "a"\ntype = "log"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", config])
    assert result.exit_code == 0, result.output
    assert "1 source(s), 1 handler(s)" in result.output
    assert SECRET.removeprefix("whsec_") not in result.output


def test_check_config_names_a_handler_that_cannot_load(tmp_path: Path) -> None:
    config = _config(tmp_path, '[[handlers]]\nname = "broken"\ntype = "nope.module:thing"\n')
    result = CliRunner().invoke(main, ["check-config", "--config", config])
    assert result.exit_code == 2
    assert "broken" in result.output
    assert "nope.module" in result.output


def test_check_config_prints_each_built_in_handler_s_options_schema() -> None:
    result = CliRunner().invoke(main, ["check-config", "--handler-schema"])
    assert result.exit_code == 0, result.output
    schemas = json.loads(result.output)
    assert set(schemas) == {"file", "http", "command", "log", "redis", "nats", "rabbitmq"}
    assert schemas["file"]["required"] == ["dir"]
    assert schemas["rabbitmq"]["required"] == ["url"]
    assert schemas["log"]["properties"]["level"]["enum"] == ["debug", "info", "warning", "error"]
    assert all(schema["additionalProperties"] is False for schema in schemas.values())


def test_serve_refuses_to_start_with_a_bad_secret(tmp_path: Path) -> None:
    path = tmp_path / "jobhook.toml"
    path.write_text('[sources.reducto]\nprovider = "reducto"\nsecrets = ["env:MISSING_SECRET"]\n')
    result = CliRunner().invoke(main, ["serve", "--config", str(path)])
    assert result.exit_code == 2
    assert "sources.reducto.secrets #1" in result.output
    assert "MISSING_SECRET" in result.output
