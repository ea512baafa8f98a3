"""The one entry for news about jobs: webhooks, polls and registrations all come through here."""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from receiver.config.settings import HandlerSettings, PollSettings
    from receiver.models import Event, IngestResult
    from receiver.store import Engine
    from receiver.store.audit import AuditEntry


class Ingestor:
    """Records events and wakes the dispatcher when one completes a job or requeues work."""

    def __init__(
        self,
        store: Engine,
        handlers: Sequence[HandlerSettings],
        wake: Callable[[], None] = lambda: None,
        resolving: Collection[str] = (),
        polling: Mapping[str, PollSettings] | None = None,
        clock: Callable[[], float] = time.time,
        notify: Callable[[Event, IngestResult], None] = lambda event, result: None,
        on_finished: Callable[[Event, IngestResult], None] | None = None,
    ) -> None:
        self._store = store
        self._handlers = tuple(handlers)
        self._wake = wake
        self._resolving = frozenset(resolving)
        self._polling = dict(polling or {})
        self._clock = clock
        self._notify = notify
        self._on_finished = on_finished
        """Called when an event completes a job that needs no resolution: its outcome is final."""
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        """Events by (via, outcome): outcome is completed, accepted or duplicate."""

    def handlers_for(self, source: str, event: Event) -> list[str]:
        return [h.name for h in self._handlers if h.matches(source, event.state)]

    async def ingest(self, event: Event, audit: AuditEntry | None = None) -> IngestResult:
        """Store ``event`` durably; a duplicate message id changes nothing but dead dispatches.
        ``audit`` (an admin call's row) is written in the same transaction."""
        # A source with a job API confirms (and fetches) first; news carrying its result does too.
        resolve = event.source in self._resolving or event.result is not None
        handlers = self.handlers_for(event.source, event)
        poll = self._polling.get(event.source)
        if poll is not None and event.via != "poll" and not event.state.terminal:
            # News pushes the next poll back: the poller asks only when news stops coming.
            at = poll.first_poll_at(event.expected_pages, self._clock())
            event = dataclasses.replace(event, poll_at=at)
        result = await self._store.ingest(event, handlers, resolve=resolve, audit=audit)
        if (result.completed and (handlers or resolve)) or result.requeued:
            self._wake()  # only when there is work: a completion with nothing to do needs none
        if result.completed and not resolve and self._on_finished is not None:
            self._on_finished(event, result)
        if result.status == "accepted":
            self._notify(event, result)  # long-polls and the event stream
        outcome = "completed" if result.completed else result.status
        self.counts[event.via, outcome] += 1
        return result
