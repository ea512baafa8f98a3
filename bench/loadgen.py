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

Each connection is an ``asyncio.Protocol`` handed a request when it is free, with no task, queue
or stream between: on two cores the sender's CPU is taken from the server it measures (71 us a
request at 3,000 a second against 81 with a stream and a task a connection, docs/performance.md).
A connection the server closes while idle is dropped and the others go on; one it closes with a
request in flight ends the run with ConnectionError.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import multiprocessing
import time
from array import array
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

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


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request in flight at a time, its answer parsed as it
    arrives (a head with a Content-Length, then that many bytes), stamped, and the connection
    handed back to the sender. A protocol rather than a stream and a task a connection: the
    sender shares two cores with the server it measures, and every microsecond it spends a
    request is taken from the server's cores (and wakes the server's threads less often)."""

    def __init__(self, sender: _Sender) -> None:
        self._sender = sender
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._expect = -1  # the whole answer's length once its head has arrived
        self._status = 0
        self._request: tuple[int, float, float] | None = None  # index, due, sent
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)  # uvloop's: not a subclass

    @property
    def open(self) -> bool:
        return self._transport is not None

    def send(self, index: int, request: bytes, due: float) -> None:
        assert self._transport is not None
        self._request = (index, due, time.time())
        self._transport.write(request)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if self._expect < 0:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end])
            self._status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            self._expect = end + 4 + length
        if len(buffer) < self._expect:
            return
        del buffer[: self._expect]
        self._expect = -1
        self._finish(self._status, time.time())

    def _finish(self, status: int, answered: float) -> None:
        request, self._request = self._request, None
        if request is not None:
            self._sender.answered(self, request, status, answered)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        in_flight = self._request is not None
        self._finish(0, float("nan"))
        self._sender.lost(self, exc, in_flight)
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class _Sender:
    """The connections, the requests waiting for one, and what every answer recorded."""

    def __init__(self, record: Record) -> None:
        self.record = record
        self.idle: collections.deque[_Connection] = collections.deque()  # in turn, as before
        self.waiting: collections.deque[tuple[int, bytes, float]] = collections.deque()
        self.in_flight = 0
        self.error: BaseException | None = None
        self.closing = False
        self.started = False
        self.settled = asyncio.Event()  # no request in flight or waiting (or a failure)

    def submit(self, index: int, request: bytes, due: float) -> None:
        self.settled.clear()
        if self.idle:
            self.in_flight += 1
            self.idle.popleft().send(index, request, due)
        else:
            self.waiting.append((index, request, due))

    def answered(self, conn: _Connection, request: tuple[int, float, float], status: int,
                 answered: float) -> None:  # fmt: skip
        index, due, sent = request
        record = self.record
        record.due.append(due)
        record.sent.append(sent)
        record.index.append(index)
        record.answered.append(answered if status else float("nan"))
        record.status.append(status)
        self.in_flight -= 1
        if status and self.waiting:  # a connection lost with its request takes no other
            self.in_flight += 1
            conn.send(*self.waiting.popleft())
        elif status:
            self.idle.append(conn)
        if not self.in_flight:
            self.settled.set()

    def lost(self, conn: _Connection, exc: Exception | None, in_flight: bool) -> None:
        if conn in self.idle:
            self.idle.remove(conn)
        if self.closing or not self.started:  # the run's own close, or before the first send
            return
        if in_flight or not (self.idle or self.in_flight):
            self.error = self.error or ConnectionError(
                f"the server closed a connection{' with a request in flight' if in_flight else ''}"
                f"{f': {exc}' if exc else ''}"
            )
            self.settled.set()


async def run(
    host: str, port: int, requests: Iterable[bytes], rate: float, connections: int = 32,
    late_after: float = LATE_AFTER,
) -> Record:  # fmt: skip
    """Send ``requests`` (raw HTTP requests, read one at a time: a generator reading a file
    keeps a long run's memory flat) at ``rate`` per second over ``connections`` connections;
    the record of every send and answer. A connection the server closes with a request in
    flight ends the run with ConnectionError once the rest is answered."""
    loop = asyncio.get_running_loop()
    record = Record(lag=Lag(late_after))
    sender = _Sender(record)
    conns: list[_Connection] = []
    try:
        for _ in range(connections):
            _, conn = await loop.create_connection(lambda: _Connection(sender), host, port)
            conns.append(conn)
        sender.idle.extend(conn for conn in conns if conn.open)
        sender.started = True
        if not sender.idle:
            raise ConnectionError("the server closed every connection before the first send")
        record.start = start = time.time() + 0.2
        for i, request in enumerate(requests):
            if sender.error is not None:  # a connection failed: the run is over
                break
            due = start + i / rate
            wait = due - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            lateness = time.time() - due
            record.lateness.append(lateness)
            record.lag.note(lateness)
            sender.submit(i, request, due)
        while sender.in_flight or sender.waiting:
            if sender.error is not None and not sender.in_flight:
                break
            sender.settled.clear()
            await sender.settled.wait()
    finally:
        sender.closing = True
        for conn in conns:
            conn.close()
        with contextlib.suppress(TimeoutError):  # the server sees each close while we run
            await asyncio.wait_for(asyncio.gather(*(conn.closed for conn in conns)), 5)
    if sender.error is not None:
        raise sender.error
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
