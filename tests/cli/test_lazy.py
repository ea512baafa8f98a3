"""The CLI loads a command's module only when that command runs: ``jobhook serve`` starts light."""

from __future__ import annotations

import json
import subprocess
import sys

import click
from click.testing import CliRunner

from receiver.cli import jobs as cli_jobs
from receiver.cli.main import LAZY_COMMANDS, main

# What only the job commands, their rendering and the demo need.
HEAVY = [
    "rich",
    "receiver.cli.jobs",
    "receiver.cli.render",
    "receiver.cli.client",
    "receiver.cli.demo",
]


def test_importing_the_cli_loads_no_job_command_nor_rich() -> None:
    # A fresh interpreter: this one has imported them all already.
    code = "import json, sys, receiver.cli.main; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(proc.stdout))
    assert "receiver.cli.main" in loaded
    assert [name for name in HEAVY if name in loaded] == []


def test_help_lists_every_command_with_its_short_help() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    ctx = click.Context(main)
    names = main.list_commands(ctx)
    assert set(LAZY_COMMANDS) <= set(names)
    assert {"serve", "demo", "check-config"} <= set(names)
    lines = result.output.splitlines()
    for name in names:
        command = main.get_command(ctx, name)
        assert command is not None
        short = command.get_short_help_str(limit=150)
        assert any(line.split() == [name, *short.split()] for line in lines), (name, short)


def test_every_job_command_is_listed_lazily_under_its_own_name() -> None:
    ctx = click.Context(main)
    for command in cli_jobs.COMMANDS:
        assert command.name in LAZY_COMMANDS
        assert main.get_command(ctx, command.name) is command


def test_the_service_loads_no_jinja2_until_a_console_page_is_shown() -> None:
    code = (
        "import json, sys, receiver.cli.main, receiver.service.serve, receiver.console.routes, "
        "receiver.console.web; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(proc.stdout))
    assert "receiver.console.web" in loaded
    assert [name for name in loaded if name.split(".")[0] == "jinja2"] == []


def test_the_http_handler_signs_without_loading_svixs_api_client() -> None:
    # svix/__init__ loads svix's whole REST API client (~0.4 s of every start); the handler
    # signs with the standardwebhooks class svix.webhooks only delegates to.
    code = "import json, sys, handlers.http; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(proc.stdout))
    assert "standardwebhooks.webhooks" in loaded
    assert "svix" not in loaded
