"""structlog setup: JSON lines when not on a terminal, and a last guard against secrets."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_SENSITIVE = ("secret", "token", "password", "api_key", "authorization", "signature")


class _Stderr:
    """Writes to whatever ``sys.stderr`` is now, so replaced or captured streams keep working."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _redact(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    for key in event_dict:
        if any(word in key.lower() for word in _SENSITIVE):
            event_dict[key] = "**********"
    return event_dict


def configure_logging(level: str = "info", fmt: str = "auto") -> None:
    """Configure structlog and route the standard library's records through it."""
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processor=renderer)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    for noisy in ("httpx", "httpcore", "aiosqlite", "asyncio"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
