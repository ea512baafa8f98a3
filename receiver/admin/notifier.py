"""In-process news of stored events, so long-polls and the event stream answer without polling.

The Ingestor calls ``notify`` after each accepted event is committed. A waiter watches one job
(``watch``) or every new completion (``watch_completions``) and gets an ``asyncio.Event`` that
is set on news; it re-reads the store then. News from other replicas never arrives here, so
waiters also re-read the store every second or so (``RECHECK_SECONDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from receiver.models import Event, IngestResult

RECHECK_SECONDS = 1.0


class Notifier:
    """Fans news of accepted events out to whoever is waiting in this process."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._completions: set[asyncio.Event] = set()
        self.closing = False
        """The service is stopping: streams and long-polls answer and end now."""

    def close(self) -> None:
        """Wake every waiter for good: the server waits for open responses before it stops."""
        self.closing = True
        for flag in (*self._completions, *(f for w in self._jobs.values() for f in w)):
            flag.set()

    def notify(self, event: Event, result: IngestResult) -> None:
        """An event was committed: wake the job's watchers, and everyone's on a completion."""
        for flag in self._jobs.get((event.source, event.job_id), ()):
            flag.set()
        if result.completed:
            for flag in self._completions:
                flag.set()

    @contextlib.contextmanager
    def watch(self, source: str, job_id: str) -> Iterator[asyncio.Event]:
        """A flag set whenever news of this job is committed, for the ``with`` block."""
        flag = asyncio.Event()
        key = (source, job_id)
        self._jobs.setdefault(key, set()).add(flag)
        try:
            yield flag
        finally:
            watchers = self._jobs.get(key)
            if watchers is not None:
                watchers.discard(flag)
                if not watchers:
                    del self._jobs[key]

    @contextlib.contextmanager
    def watch_completions(self) -> Iterator[asyncio.Event]:
        """A flag set whenever a new completion is committed, for the ``with`` block."""
        flag = asyncio.Event()
        self._completions.add(flag)
        try:
            yield flag
        finally:
            self._completions.discard(flag)

    @property
    def watchers(self) -> int:
        return sum(len(w) for w in self._jobs.values()) + len(self._completions)


async def wait_flag(flag: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``flag``; True when it was set (and clear it for next time)."""
    if seconds > 0 and not flag.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(flag.wait(), seconds)
    was_set = flag.is_set()
    flag.clear()
    return was_set
