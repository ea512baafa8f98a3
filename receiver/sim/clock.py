"""The simulator's notion of "now": the wall clock, or a manual one that tests advance."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A source of unix time in seconds; job timelines, URL expiry and rate windows read it."""

    def time(self) -> float: ...


class SystemClock:
    """The real wall clock."""

    def time(self) -> float:
        return time.time()


class ManualClock:
    """A clock that only moves when told to, so tests can step through a job's life."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward (never backward)."""
        if seconds < 0:
            raise ValueError("a clock never goes backward")
        self._now += seconds
