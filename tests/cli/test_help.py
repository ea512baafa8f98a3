"""Every command's ``--help`` as a user reads it: each option explained, each ``JOBHOOK_*``
variable that sets one named, and command summaries that end where their sentence does."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import pytest
from click.testing import CliRunner

from receiver.cli.main import main

if TYPE_CHECKING:
    from collections.abc import Iterator


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


COMMANDS = list(_commands(main))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_names_every_variable_that_sets_an_option(path: tuple[str, ...]) -> None:
    text = _help(path)
    for param in _command(path).params:
        if isinstance(param, click.Option) and param.envvar:
            assert f"env var: {param.envvar}" in text, (param.name, text)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_option_is_explained(path: tuple[str, ...]) -> None:
    unexplained = [
        param.opts[0]
        for param in _command(path).params
        if isinstance(param, click.Option) and not param.help
    ]
    assert unexplained == []


def test_the_url_and_token_options_name_their_variables() -> None:
    for path in [("jobs", "ls"), ("status",), ("wait",), ("replay",), ("jobs", "reprocess")]:
        text = _help(path)
        assert "env var: JOBHOOK_URL" in text
        assert "env var: JOBHOOK_ADMIN_TOKEN" in text


@pytest.mark.parametrize("group", [(), ("jobs",)], ids=["jobhook", "jobs"])
def test_command_summaries_are_not_cut(group: tuple[str, ...]) -> None:
    listing = _help(group).split("Commands:\n", 1)[1]
    assert "..." not in listing, listing
