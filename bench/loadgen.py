"""An open-loop load generator: pre-signed webhooks sent at a fixed rate, answers timed.

Requests are due at ``start + i / rate`` whatever the server does (no coordinated omission);
a pool of keep-alive connections sends them, and each answer's arrival is stamped with
``time.time()`` so it can be compared with stamps taken in another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass


@dataclass(slots=True)
class Answer:
    job_id: str
    status: int
    due: float
    answered: float
    """time.time() when the whole answer had arrived."""


async def _send_all(
    host: str, port: int, queue: asyncio.Queue[tuple[str, bytes, float] | None],
    answers: list[Answer],
) -> None:  # fmt: skip
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while (item := await queue.get()) is not None:
            job_id, request, due = item
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            answers.append(Answer(job_id, status, due, time.time()))
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def send(
    host: str, port: int, requests: list[tuple[str, bytes]], rate: float, connections: int = 32
) -> tuple[list[Answer], float]:
    """Send ``requests`` (job id, raw HTTP request) at ``rate`` per second; (answers, lag).

    ``lag`` is how far behind schedule the sender fell at worst, in seconds.
    """
    queue: asyncio.Queue[tuple[str, bytes, float] | None] = asyncio.Queue()
    answers: list[Answer] = []
    workers = [asyncio.create_task(_send_all(host, port, queue, answers))
               for _ in range(connections)]  # fmt: skip
    start = time.time() + 0.2
    lag = 0.0
    for i, (job_id, request) in enumerate(requests):
        due = start + i / rate
        wait = due - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        else:
            lag = max(lag, -wait)
        queue.put_nowait((job_id, request, due))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    return answers, lag


def http_request(host: str, port: int, path: str, headers: dict[str, str], body: str) -> bytes:
    data = body.encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(data)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data
