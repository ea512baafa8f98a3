"""The ``log`` handler: one ``completion`` structlog event per completion, nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import field_validator

from handlers.options import HandlerOptions

if TYPE_CHECKING:
    from receiver.completion import Completion

log = structlog.get_logger("handlers.log")

LEVELS = ("debug", "info", "warning", "error")


class LogOptions(HandlerOptions):
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Any case: ``WARNING`` is ``warning``."""

    @field_validator("level", mode="before")
    @classmethod
    def _known_level(cls, level: object) -> str:
        if not isinstance(level, str) or level.lower() not in LEVELS:
            raise ValueError(f"must be one of {', '.join(LEVELS)}, not {level!r}")
        return level.lower()


class LogHandler:
    """Logs each completion (ids, state, result size and sha256, metadata) at ``level``."""

    options_model = LogOptions

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.level: str = LogOptions.parse(options).level

    def __repr__(self) -> str:
        return f"LogHandler(name={self.name!r}, level={self.level!r})"

    async def handle(self, completion: Completion) -> None:
        """Emit one ``completion`` event."""
        result = completion.result
        # Looked up on every call: logging may be configured after the handler is built.
        emit = getattr(log, self.level)
        emit(
            "completion",
            handler=self.name,
            completion_id=completion.message_id,
            source=completion.source,
            job_id=completion.job_id,
            state=completion.state,
            provider_status=completion.provider_status,
            result_bytes=result.bytes if result else None,
            result_sha256=result.sha256 if result else None,
            error=completion.error,
            metadata=completion.metadata,
        )
