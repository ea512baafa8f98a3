"""Per-key rate budgets like the providers' own, and faults injected on request."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from receiver.sim.clock import Clock

Target = Literal["api", "blobs"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The budget after one request: allowed or not, and what the headers say."""

    allowed: bool
    limit: int
    remaining: int
    reset: int
    retry_after: int | None = None

    def headers(self, prefix: str) -> dict[str, str]:
        values = {
            f"{prefix}-Limit": self.limit,
            f"{prefix}-Remaining": self.remaining,
            f"{prefix}-Reset": self.reset,
        }
        out = {name: str(value) for name, value in values.items()}
        if self.retry_after is not None:
            out["Retry-After"] = str(self.retry_after)
        return out


class RateLimiter:
    """A sliding window: at most ``limit`` accepted requests per key in any ``window`` seconds.

    Refused requests do not use up the budget, as with the providers' own limiters.
    """

    def __init__(self, clock: Clock, limit: int, window: float = 60.0) -> None:
        self._clock = clock
        self.limit = limit
        self.window = window
        self._seen: dict[str, deque[float]] = {}

    def check(self, key: str) -> Decision:
        """Count one request for ``key`` if the budget allows it."""
        now = self._clock.time()
        seen = self._seen.setdefault(key, deque())
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if len(seen) >= self.limit:
            wait = max(1, math.ceil(seen[0] + self.window - now))
            return Decision(False, self.limit, 0, wait, retry_after=wait)
        seen.append(now)
        reset = math.ceil(seen[0] + self.window - now)
        return Decision(True, self.limit, self.limit - len(seen), reset)


@dataclass(slots=True)
class Fault:
    """What the next ``count`` requests to ``target`` get instead of (or before) their answer."""

    count: int
    target: Target = "api"
    status: int | None = None
    retry_after: int | None = None
    latency: float = 0.0
    truncate: int | None = None


class Faults:
    """A queue of injected faults; each request to a target consumes one use of the first one."""

    def __init__(self) -> None:
        self._queue: list[Fault] = []

    def add(self, fault: Fault) -> None:
        self._queue.append(fault)

    def clear(self) -> None:
        self._queue.clear()

    def take(self, target: Target) -> Fault | None:
        """The fault this request gets, if one is queued for its target."""
        for fault in self._queue:
            if fault.target == target:
                fault.count -= 1
                if fault.count <= 0:
                    self._queue.remove(fault)
                return fault
        return None

    def pending(self) -> list[Fault]:
        return list(self._queue)
