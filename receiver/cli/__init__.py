"""The jobhook command."""

from receiver.cli.main import main

__all__ = ["main"]
