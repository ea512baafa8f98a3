"""A handler that records when it starts: ``type = "bench.stamp:Stamp"``, ``path = FILE``.

Each call appends ``job_id<TAB>time.time()`` to ``path`` (one line, flushed), and returns.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from receiver.completion import Completion


class Stamp:
    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    async def handle(self, completion: Completion) -> None:
        self._file.write(f"{completion.job_id}\t{time.time():.6f}\n")

    async def close(self) -> None:
        self._file.close()
