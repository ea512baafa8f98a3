"""Loading ``"package.module:attr"``, the way handlers and providers are named, with exact errors.

The caller passes the error class its own callers expect (HandlerLoadError, ProviderLoadError)
and prefixes the message with what was being loaded.
"""

from __future__ import annotations

import importlib
from typing import Any

from receiver.errors import ConfigError

__all__ = ["import_from_string"]


def import_from_string(spec: str, error: type[ConfigError] = ConfigError) -> Any:
    """The object ``spec`` names (a dotted attr allowed); ``error`` saying exactly why not."""
    module_name, sep, attrs = spec.partition(":")
    if not sep or not module_name or not attrs:
        raise error(f'{spec!r} must be in the form "package.module:attr"')
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is not None and not f"{module_name}.".startswith(f"{exc.name}."):
            # the module exists, and one it imports does not
            raise error(f"importing {module_name!r} failed: {exc}") from exc
        raise error(
            f"module {module_name!r} not found; install the package that provides it in "
            "jobhook's environment, or correct the name"
        ) from exc
    except Exception as exc:
        raise error(f"importing {module_name!r} failed: {_describe(exc)}") from exc
    found: Any = module
    for attr in attrs.split("."):
        try:
            found = getattr(found, attr)
        except AttributeError:
            raise error(f"module {module_name!r} has no attribute {attrs!r}") from None
    return found


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
