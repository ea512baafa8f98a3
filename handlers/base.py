"""The handler contract and how ``[[handlers]]`` entries become handler objects.

A handler is any object with a ``name`` and ``async def handle(self, completion) -> None``;
raising means "retry later". Optional ``async def start()`` / ``async def close()`` are called
by the service's lifespan. ``type`` is a built-in name, an entry point in the group
``jobhook.handlers``, or ``"package.module:attr"``; the loaded object is called with
``name=...`` and the entry's other keys as keyword arguments. Built-in handlers check those
keys with their ``options_model`` (``handlers.options``); a plugin checks its own, as it likes.
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from receiver.completion import Handler
from receiver.errors import HandlerLoadError

if TYPE_CHECKING:
    from receiver.config.settings import HandlerSettings

ENTRY_POINT_GROUP = "jobhook.handlers"
__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "Handler", "import_from_string", "load_handler"]

BUILTINS = {
    "file": "handlers.file:FileHandler",
    "http": "handlers.http:HttpHandler",
    "command": "handlers.command:CommandHandler",
    "log": "handlers.log:LogHandler",
    "redis": "handlers.redis:RedisHandler",
    "nats": "handlers.nats:NatsHandler",
    "rabbitmq": "handlers.rabbitmq:RabbitMQHandler",
}


def import_from_string(spec: str) -> Any:
    """Load ``"package.module:attr"`` (dotted attr allowed) with an exact error."""
    module_name, sep, attrs = spec.partition(":")
    if not sep or not module_name or not attrs:
        raise HandlerLoadError(f'{spec!r} must be in the form "package.module:attribute"')
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name is None or f"{module_name}.".startswith(f"{exc.name}.")
        if not missing:  # the module exists, and one it imports does not
            raise HandlerLoadError(f"importing {module_name!r} failed: {exc}") from exc
        raise HandlerLoadError(
            f"module {module_name!r} not found; install the package that provides it in "
            "jobhook's environment, or correct the type"
        ) from exc
    except Exception as exc:
        raise HandlerLoadError(f"importing {module_name!r} failed: {_describe(exc)}") from exc
    obj: Any = module
    for attr in attrs.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise HandlerLoadError(f"{module_name!r} has no attribute {attrs!r}") from None
    return obj


def _resolve_type(kind: str) -> Any:
    if kind in BUILTINS:
        return import_from_string(BUILTINS[kind])
    if ":" in kind:
        return import_from_string(kind)
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
