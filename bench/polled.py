"""A sampler that runs beside a benchmark's load: a thread that samples every ``interval``."""

from __future__ import annotations

import threading
from typing import Self


class Polled:
    """Samples (``_sample``) taken from a thread every ``interval`` seconds while the ``with``
    block runs, and once on the way in and once on the way out."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _sample(self) -> None:
        raise NotImplementedError
