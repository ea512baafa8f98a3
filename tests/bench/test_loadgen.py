"""bench.loadgen, the open-loop sender: its lag counts the sends that fell behind their slot
and the worst of them (not only the worst), every request is recorded against its slot, and
``run_apart`` sends from a process of its own."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
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


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One request off ``reader``: its path (its body read and dropped)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))  # fmt: skip
    await reader.readexactly(length)
    return head.split(b" ", 2)[1]


async def _answer_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      delay: float = 0.0, seen: list[bytes] | None = None) -> None:  # fmt: skip
    """Answer every request of a connection with ``OK``, ``delay`` seconds after it came."""
    try:
        while True:
            path = await _read_request(reader)
            if seen is not None:
                seen.append(path)
            if delay:
                await asyncio.sleep(delay)
            writer.write(OK)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _server(delay: float = 0.0,
                  seen: list[bytes] | None = None) -> tuple[asyncio.Server, int]:  # fmt: skip
    server = await asyncio.start_server(
        functools.partial(_answer_all, delay=delay, seen=seen), "127.0.0.1", 0
    )
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


def _requests_naming_this_process(port: int, count: int) -> list[bytes]:
    path = f"/webhooks/{os.getpid()}"
    return [loadgen.http_request("127.0.0.1", port, path, {}, "{}") for _ in range(count)]


async def test_run_apart_sends_from_a_process_of_its_own() -> None:
    # The samplers of a fixed-rate phase are threads of the bench's process: the sender runs
    # in another one, and says how much CPU it spent there.
    paths: list[bytes] = []
    server, port = await _server(seen=paths)
    async with server:
        record, cpu = await asyncio.to_thread(
            loadgen.run_apart, "127.0.0.1", port,
            functools.partial(_requests_naming_this_process, port, 100), 1000.0, 4,
        )  # fmt: skip
    assert record.lag.sends == 100 == len(record.status)
    assert set(record.status) == {200}
    senders = {path.rsplit(b"/", 1)[1] for path in paths}
    assert len(senders) == 1
    assert senders != {str(os.getpid()).encode()}
    assert cpu > 0


async def test_a_connection_closed_while_idle_is_dropped_and_the_others_send() -> None:
    accepted = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        if accepted == 2:  # closed at once, long before the first send is due (0.2 s after)
            writer.close()
            return
        await _answer_all(reader, writer)

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        record = await loadgen.run("127.0.0.1", port, (r for _, r in _requests(port, 40)),
                                   rate=400.0, connections=4)  # fmt: skip
    assert accepted == 4
    assert sorted(record.index) == list(range(40))
    assert set(record.status) == {200}


async def test_a_connection_closed_with_a_request_in_flight_ends_the_run() -> None:
    served = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await _read_request(reader)
                served += 1
                if served == 5:  # this one is never answered
                    break
                writer.write(OK)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ConnectionError, match="with a request in flight"):
            await asyncio.wait_for(
                loadgen.run("127.0.0.1", port, (r for _, r in _requests(port, 20)),
                            rate=400.0, connections=2),
                10,
            )  # fmt: skip
