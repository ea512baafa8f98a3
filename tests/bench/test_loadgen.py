"""bench.loadgen, the open-loop sender: its lag counts the sends that fell behind their slot
and the worst of them (not only the worst), and every request is recorded against its slot."""

from __future__ import annotations

import asyncio
import time

import pytest

from bench import loadgen

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def test_lag_counts_sends_later_than_the_threshold_and_keeps_the_worst() -> None:
    lag = loadgen.Lag.of([0.0, 0.0002, 0.0011, 0.05, -0.0001, 0.003])
    assert lag.sends == 6
    assert lag.late == 3  # 1.1 ms, 50 ms and 3 ms: a wake-up 0.2 ms late is not falling behind
    assert lag.worst == pytest.approx(0.05)
    assert lag.share == pytest.approx(0.5)
    assert loadgen.Lag.of([0.004], late_after=0.005).late == 0
    assert loadgen.Lag().share == 0.0


async def _server(delay: float = 0.0) -> tuple[asyncio.Server, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))  # fmt: skip
                await reader.readexactly(length)
                if delay:
                    await asyncio.sleep(delay)
                writer.write(OK)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _requests(port: int, count: int) -> list[tuple[str, bytes]]:
    return [(f"job-{n}", loadgen.http_request("127.0.0.1", port, "/webhooks/x", {}, "{}"))
            for n in range(count)]  # fmt: skip


async def test_every_request_is_answered_and_timed_from_its_slot() -> None:
    server, port = await _server(delay=0.01)
    async with server:
        answers, lag = await loadgen.send("127.0.0.1", port, _requests(port, 50), rate=500.0,
                                          connections=4)  # fmt: skip
    assert sorted(a.job_id for a in answers) == sorted(f"job-{n}" for n in range(50))
    assert all(a.status == 200 for a in answers)
    assert all(a.answered - a.due >= 0.01 for a in answers)  # the server's 10 ms, from the slot
    dues = sorted(a.due for a in answers)
    assert dues[-1] - dues[0] == pytest.approx(49 / 500.0)
    assert lag.sends == 50


async def test_a_stalled_sender_counts_its_late_sends() -> None:
    server, port = await _server()
    loop = asyncio.get_running_loop()
    async with server:
        # Block the sender's loop for 50 ms a fifth of the way in: the sends due meanwhile
        # go out late, and the lag says so (the server had nothing to do with it).
        loop.call_later(0.25, time.sleep, 0.05)
        record = await loadgen.run("127.0.0.1", port, (r for _, r in _requests(port, 200)),
                                   rate=1000.0, connections=4)  # fmt: skip
    assert record.lag.sends == 200 == len(record.lateness) == len(record.status)
    assert record.lag.late >= 10  # at least the ~40 sends due during the stall, give or take
    assert 0.02 < record.lag.worst < 0.5
    assert set(record.status) == {200}
