"""How both stores' group commits take a batch from their queue of writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


def take_batch(queue: asyncio.Queue[T | None], first: T, limit: int) -> tuple[list[T], bool]:
    """``first`` and what else has queued, up to ``limit`` in all, without waiting; and whether
    the stop mark (None) came among them (nothing after it is taken)."""
    batch = [first]
    while len(batch) < limit and not queue.empty():
        item = queue.get_nowait()
        if item is None:
            return batch, True
        batch.append(item)
    return batch, False
