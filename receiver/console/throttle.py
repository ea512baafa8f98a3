"""Failed console logins, limited per client address: past ``attempts`` failures within
``window`` seconds an address gets 429 with ``Retry-After`` until its oldest failure ages out.

Kept in memory, per replica: a restart forgets it, which the window (minutes) makes harmless,
and each replica of several counts on its own. Other addresses are never affected, so a
guesser cannot lock the operators out, and a successful login does not clear the count (a
guesser holding one token learns nothing more by it). The number of addresses tracked is
bounded: the oldest is forgotten first.
"""

from __future__ import annotations

import collections
import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_ADDRESSES = 10_000


class Throttle:
    """Failures per address in a sliding window."""

    def __init__(
        self, attempts: int, window: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.attempts = attempts
        self.window = window
        self._clock = clock
        self._failures: collections.OrderedDict[str, collections.deque[float]] = (
            collections.OrderedDict()
        )

    def _recent(self, address: str, now: float) -> collections.deque[float] | None:
        failures = self._failures.get(address)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        if not failures:
            del self._failures[address]
            return None
        return failures

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again; None when it may now."""
        now = self._clock()
        failures = self._recent(address, now)
        if failures is None or len(failures) < self.attempts:
            return None
        return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, address: str) -> None:
        """Count one failed login from ``address``."""
        now = self._clock()
        failures = self._recent(address, now)
        if failures is None:
            failures = self._failures[address] = collections.deque(maxlen=self.attempts)
            while len(self._failures) > MAX_ADDRESSES:
                self._failures.popitem(last=False)
        failures.append(now)
        self._failures.move_to_end(address)
