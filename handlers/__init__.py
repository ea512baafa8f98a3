"""Downstream handlers: built-ins (file, http, command, log, queues) and the plugin loader."""

from handlers.base import ENTRY_POINT_GROUP, Handler, load_handler

__all__ = ["ENTRY_POINT_GROUP", "Handler", "load_handler"]
