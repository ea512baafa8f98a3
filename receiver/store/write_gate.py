"""Lets another thread hold the SQLite store's writes between two batches, briefly.

The checkpoint thread (``receiver.store.checkpoint``) starts the WAL over by copying its last
frames while no commit lands; the group commit (``receiver.store.sqlite_commit``) asks the gate
before each batch. The thread waits for the batch in flight, never for the event loop's other
work, and gives up after a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


class WriteGate:
    """Open unless a thread holds it; the group commit passes it before every batch."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._busy = False
        self._quiet: threading.Event | None = None

    async def enter(self) -> None:
        """Before a batch (on the loop): wait while the gate is held."""
        if not self._open.is_set():
            await self._open.wait()
        self._busy = True

    def leave(self) -> None:
        """After a batch (on the loop): a thread waiting to hold the gate may go on."""
        self._busy = False
        if not self._open.is_set() and self._quiet is not None:
            self._quiet.set()

    @contextlib.contextmanager
    def held(self, loop: asyncio.AbstractEventLoop | None, timeout: float) -> Iterator[bool]:
        """From another thread: no batch starts while inside. True once the batch in flight
        (if any) has committed; False when that took over ``timeout`` or ``loop`` is gone."""
        quiet = threading.Event()
        try:
            if loop is None:
                raise RuntimeError("no loop")
            loop.call_soon_threadsafe(self._close, quiet)
        except RuntimeError:  # the store is closed, or closing
            yield False
            return
        try:
            yield quiet.wait(timeout)
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._open.set)

    def _close(self, quiet: threading.Event) -> None:
        self._open.clear()
        self._quiet = quiet
        if not self._busy:
            quiet.set()
