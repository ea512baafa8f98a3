"""A click group whose commands are imported when used, so ``jobhook serve`` loads none of them.

The job commands bring rich, httpx and the admin client; the simulator brings its provider
shapes. ``jobhook --help`` still lists every command with its short help (it loads them).
"""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    """``lazy`` maps a command's name to ``"module:attribute"``, imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command) or command.name != cmd_name:
                raise TypeError(f"{self.lazy[cmd_name]} is not the click command {cmd_name!r}")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)
