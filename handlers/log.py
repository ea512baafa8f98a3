"""The ``log`` handler: one ``completion`` structlog event per completion, nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from receiver.completion import Completion

log = structlog.get_logger("handlers.log")

LEVELS = ("debug", "info", "warning", "error")


class LogHandler:
    """Logs each completion (ids, state, result size and sha256, metadata) at ``level``."""

    def __init__(self, name: str, level: str = "info") -> None:
        if not isinstance(level, str) or level.lower() not in LEVELS:
            raise ValueError(f"'level' must be one of {', '.join(LEVELS)}, not {level!r}")
        self.name = name
        self.level = level.lower()

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
