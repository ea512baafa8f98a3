"""An open-loop load generator: pre-signed webhooks sent at a fixed rate, answers timed.

Requests are due at ``start + i / rate`` whatever the server does (no coordinated omission):
an answer's latency is counted from its request's slot, so a request that waited for a free
connection behind a stalled server waits in its figure. A pool of keep-alive connections sends
them, and each answer's arrival is stamped with ``time.time()`` so it can be compared with stamps
taken in another process.

The sender can fall behind its own schedule (its process starved of CPU beside the server on a
small machine): every send's lateness (when the schedule released it to the connections, against
its slot) is kept, and ``Lag`` counts the sends later than ``LATE_AFTER`` and the worst, so a
report can say when the sender, not the server, is what a tail measures. A request that then
waits for a free connection (every one of them waiting on the server) is the server's wait, not
the sender's: it is in the answer's latency, and in ``sent`` - ``due``, not in the lag. The
figures are kept in arrays (not an object a request) so that a run of millions gives the garbage
collector no work mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from array import array
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

LATE_AFTER = 0.001
"""A send handed to a connection more than this many seconds after its slot is late (a timer's
wake-up is a few tens of microseconds late on any machine: that is not falling behind)."""


@dataclass(slots=True)
class Answer:
    job_id: str
    status: int
    due: float
    answered: float
    """time.time() when the whole answer had arrived."""


@dataclass(slots=True)
class Lag:
    """How far behind its schedule the sender fell: sends later than ``late_after``, the worst."""

    late_after: float = LATE_AFTER
    sends: int = 0
    late: int = 0
    worst: float = 0.0
    """Seconds: the latest any send was, against its slot (0 when none was late at all)."""

    def note(self, lateness: float) -> None:
        self.sends += 1
        if lateness > self.late_after:
            self.late += 1
        self.worst = max(self.worst, lateness)

    @classmethod
    def of(cls, lateness: Iterable[float], late_after: float = LATE_AFTER) -> Lag:
        lag = cls(late_after)
        for each in lateness:
            lag.note(each)
        return lag

    @property
    def share(self) -> float:
        return self.late / self.sends if self.sends else 0.0


@dataclass(slots=True)
class Record:
    """One run's sends and answers, a column each. By answer (in the order they came): the
    request's index, its slot (``due``), when a connection wrote it (``sent``), when its answer
    had arrived (``answered``, NaN when none came) and the answer's status (0 when none came).
    By request (in index order): ``lateness``, how late the schedule released it."""

    due: array[float] = field(default_factory=lambda: array("d"))
    sent: array[float] = field(default_factory=lambda: array("d"))
    index: array[int] = field(default_factory=lambda: array("q"))
    answered: array[float] = field(default_factory=lambda: array("d"))
    status: array[int] = field(default_factory=lambda: array("i"))
    lateness: array[float] = field(default_factory=lambda: array("d"))
    lag: Lag = field(default_factory=Lag)
    start: float = 0.0
    """time.time() of the first request's slot."""


async def _send_all(
    host: str, port: int, queue: asyncio.Queue[tuple[int, bytes, float] | None], record: Record,
) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while (item := await queue.get()) is not None:
            index, request, due = item
            sent = time.time()
            status = 0
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
            finally:
                record.due.append(due)
                record.sent.append(sent)
                record.index.append(index)
                record.answered.append(time.time() if status else float("nan"))
                record.status.append(status)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def run(
    host: str, port: int, requests: Iterable[bytes], rate: float, connections: int = 32,
    late_after: float = LATE_AFTER,
) -> Record:  # fmt: skip
    """Send ``requests`` (raw HTTP requests, read one at a time: a generator reading a file
    keeps a long run's memory flat) at ``rate`` per second over ``connections`` connections;
    the record of every send and answer."""
    queue: asyncio.Queue[tuple[int, bytes, float] | None] = asyncio.Queue()
    record = Record(lag=Lag(late_after))
    workers = [asyncio.create_task(_send_all(host, port, queue, record))
               for _ in range(connections)]  # fmt: skip
    record.start = start = time.time() + 0.2
    try:
        for i, request in enumerate(requests):
            due = start + i / rate
            wait = due - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            lateness = time.time() - due
            record.lateness.append(lateness)
            record.lag.note(lateness)
            queue.put_nowait((i, request, due))
    finally:
        for _ in workers:
            queue.put_nowait(None)
        await asyncio.gather(*workers)
    return record


def run_apart(
    host: str, port: int, requests: Callable[[], Iterable[bytes]], rate: float,
    connections: int = 32, late_after: float = LATE_AFTER,
) -> tuple[Record, float]:  # fmt: skip
    """``run`` in a process of its own (spawned, on uvloop), so that nothing else of the
    caller's (its threads sampling sizes, metrics or the disk) shares the sender's interpreter
    and delays its sends; ``requests`` is a picklable callable making the requests there (a
    ``functools.partial`` of a module-level function). The record, and the CPU seconds the
    sender's process spent sending."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(_run_here, host, port, requests, rate, connections, late_after).result()


def _run_here(
    host: str, port: int, requests: Callable[[], Iterable[bytes]], rate: float,
    connections: int, late_after: float,
) -> tuple[Record, float]:  # fmt: skip
    import uvloop

    cpu = time.process_time()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        record = runner.run(run(host, port, requests(), rate, connections, late_after))
    return record, time.process_time() - cpu


async def send(
    host: str, port: int, requests: Sequence[tuple[str, bytes]], rate: float, connections: int = 32
) -> tuple[list[Answer], Lag]:
    """Send ``requests`` (job id, raw HTTP request) at ``rate`` per second; (answers, lag)."""
    record = await run(host, port, (r for _, r in requests), rate, connections)
    answers = [
        Answer(requests[i][0], status, due, answered)
        for i, status, due, answered in zip(
            record.index, record.status, record.due, record.answered, strict=True
        )
        if status
    ]
    return answers, record.lag


def http_request(host: str, port: int, path: str, headers: dict[str, str], body: str) -> bytes:
    data = body.encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(data)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data
