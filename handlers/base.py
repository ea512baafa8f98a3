"""The handler contract and how ``[[handlers]]`` entries become handler objects.

A handler is any object with a ``name`` and ``async def handle(self, completion) -> None``;
raising means "retry later". Optional ``async def start()`` / ``async def close()`` are called
by the service's lifespan. ``type`` is a built-in name, an entry point in the group
``jobhook.handlers``, or ``"package.module:attr"``; the loaded object is called with
``name=...`` and the entry's other keys as keyword arguments. Built-in handlers check those
keys with their ``options_model`` (``handlers.options``); a plugin checks its own, as it likes.
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from receiver.completion import Handler
from receiver.errors import HandlerLoadError
from receiver.importer import import_from_string

if TYPE_CHECKING:
    from receiver.config.settings import HandlerSettings

ENTRY_POINT_GROUP = "jobhook.handlers"
__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "Handler", "load_handler"]

BUILTINS = {
    "file": "handlers.file:FileHandler",
    "http": "handlers.http:HttpHandler",
    "command": "handlers.command:CommandHandler",
    "log": "handlers.log:LogHandler",
    "redis": "handlers.redis:RedisHandler",
    "nats": "handlers.nats:NatsHandler",
    "rabbitmq": "handlers.rabbitmq:RabbitMQHandler",
}


def _resolve_type(kind: str) -> Any:
    if kind in BUILTINS:
        return import_from_string(BUILTINS[kind], HandlerLoadError)
    if ":" in kind:
        return import_from_string(kind, HandlerLoadError)
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=kind):
        try:
            return ep.load()
        except Exception as exc:
            raise HandlerLoadError(f"entry point {kind!r} failed to load: {exc}") from exc
    raise HandlerLoadError(
        f"unknown handler type {kind!r}: not built in ({', '.join(sorted(BUILTINS))}), "
        f"not an entry point in {ENTRY_POINT_GROUP!r}, not 'package.module:attr'"
    )


def load_handler(settings: HandlerSettings) -> Handler:
    """Build the handler an entry describes; HandlerLoadError names it and the reason."""
    try:
        factory = _resolve_type(settings.type)
        handler = factory(name=settings.name, **settings.options)
    except HandlerLoadError as exc:
        raise HandlerLoadError(f"handler {settings.name!r}: {exc}") from exc
    except (TypeError, ValueError) as exc:
        # One line per problem (a built-in's options may have several), each naming the handler.
        where = f"handler {settings.name!r} ({settings.type})"
        lines = str(exc).splitlines() or [type(exc).__name__]
        raise HandlerLoadError("\n".join(f"{where}: {line}" for line in lines)) from exc
    except Exception as exc:
        raise HandlerLoadError(
            f"handler {settings.name!r} ({settings.type}): {_describe(exc)}"
        ) from exc
    if not isinstance(handler, Handler) or not inspect.iscoroutinefunction(handler.handle):
        raise HandlerLoadError(
            f"handler {settings.name!r}: {settings.type} did not produce an object with "
            "'name' and 'async handle(completion)'"
        )
    return handler


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
