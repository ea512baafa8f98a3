"""The one entry for news about jobs: webhooks, polls and registrations all come through here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from receiver.config import HandlerSettings
    from receiver.models import Event, IngestResult
    from receiver.store import Store


class Ingestor:
    """Records events and wakes the dispatcher when one completes a job or requeues work."""

    def __init__(
        self,
        store: Store,
        handlers: Sequence[HandlerSettings],
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._handlers = tuple(handlers)
        self._wake = wake

    def handlers_for(self, source: str, event: Event) -> list[str]:
        return [h.name for h in self._handlers if h.matches(source, event.state)]

    async def ingest(self, event: Event) -> IngestResult:
        """Store ``event`` durably; a duplicate message id changes nothing but dead dispatches."""
        result = await self._store.ingest(event, self.handlers_for(event.source, event))
        if result.completed or result.requeued:
            self._wake()
        return result
