"""Pieces every background loop shares: who we are, and how we wait."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid


def worker_id() -> str:
    """A lease owner name unique to this process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def wait_either(stop: asyncio.Event, wakeup: asyncio.Event, seconds: float) -> None:
    """Wait until ``stop`` or ``wakeup`` is set, or ``seconds`` pass."""
    if stop.is_set() or wakeup.is_set():
        return
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wakeup.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*waiters, return_exceptions=True)
