"""The SQLite writer process's fsync outside the COMMIT (``receiver.store.sqlite.writer.Syncer``):
a batch is answered only once an fsync of the WAL file that began after its COMMIT has
returned, the next batch is written meanwhile, and a failed fsync fails what waits and ends
the process. ``serve`` runs here on a thread, on a real SQLite file, its fsyncs gated."""

from __future__ import annotations

import asyncio
import errno
import os
import pickle
import select
import socket
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from receiver.models import Event, State
from receiver.store.sqlite import writer
from receiver.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

WAIT = 10.0
"""Seconds a step may take before the test fails (each returns as soon as its event comes)."""


def insert(db: sqlite3.Connection, x: int) -> int:
    """An operation, sent by name as the store's are."""
    db.execute("INSERT INTO t (x) VALUES (?)", (x,))
    return x


class GatedSync:
    """``os.fdatasync`` that records each call's file and waits until released (or fails)."""

    def __init__(self, error: OSError | None = None) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.files: list[int] = []
        self.error = error

    def __call__(self, fd: int) -> None:
        self.files.append(os.fstat(fd).st_ino)
        self.started.release()
        assert self.release.wait(WAIT)
        if self.error is not None:
            raise self.error


class Parent:
    """The parent's end of the socket: batches out, frames in."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(WAIT)
        self.thread: threading.Thread | None = None

    def ended(self) -> bool:
        """Whether ``serve`` returned (waiting for it, up to ``WAIT``)."""
        assert self.thread is not None
        self.thread.join(WAIT)
        return not self.thread.is_alive()

    def send(self, x: int) -> None:
        data = pickle.dumps([(insert, (x,))])
        self.sock.sendall(len(data).to_bytes(writer.HEADER, "big") + data)

    def receive(self) -> Any:
        """The next frame (unbuffered: what has not been read stays in the socket)."""
        header = self.sock.recv(writer.HEADER, socket.MSG_WAITALL)
        size = int.from_bytes(header, "big")
        return pickle.loads(self.sock.recv(size, socket.MSG_WAITALL))

    def closed(self) -> bool:
        """Whether the writer closed its end (waiting for it, up to ``WAIT``)."""
        return self.sock.recv(1) == b""

    def quiet(self, seconds: float) -> bool:
        """Whether no frame comes within ``seconds`` (the one wait on time: an absence)."""
        ready, _, _ = select.select([self.sock], [], [], seconds)
        return not ready


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Parent, GatedSync, Path, list[int]]]:
    path = tmp_path / "w.db"
    keep = sqlite3.connect(path, isolation_level=None)  # the parent's connection: the WAL stays
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("CREATE TABLE t (x INTEGER)")
    gate = GatedSync()
    monkeypatch.setattr(os, "fdatasync", gate)
    ours, theirs = socket.socketpair()
    exit_code: list[int] = []
    thread = threading.Thread(
        target=lambda: exit_code.append(writer.serve(theirs.detach(), str(path))), daemon=True
    )
    thread.start()
    parent = Parent(ours)
    parent.thread = thread
    try:
        assert parent.receive() == ("ok", [])
        yield parent, gate, path, exit_code
    finally:
        gate.release.set()
        ours.close()
        thread.join(WAIT)
        keep.close()


def test_a_batch_is_answered_after_its_fsync_and_the_next_is_written_meanwhile(
    served: tuple[Parent, GatedSync, Path, list[int]],
) -> None:
    parent, gate, path, exit_code = served
    parent.send(1)
    assert parent.receive() == ("written", 1)
    assert gate.started.acquire(timeout=WAIT)  # batch 1's fsync has begun, and waits
    parent.send(2)
    assert parent.receive() == ("written", 2)  # committed while the fsync before it waits
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    reader.close()
    assert parent.quiet(0.2), "a batch was answered before its fsync returned"
    gate.release.set()
    replies = {parent.receive()[0]: None for _ in range(2)}
    assert sorted(replies) == [1, 2]
    wal = os.stat(f"{path}-wal").st_ino
    assert gate.files
    assert set(gate.files) == {wal}  # the WAL file is what was fsynced
    parent.sock.shutdown(socket.SHUT_WR)
    assert parent.closed()  # it ends once its socket closes
    assert parent.ended()
    assert exit_code == [0]


def test_each_reply_says_its_batch_and_results(
    served: tuple[Parent, GatedSync, Path, list[int]],
) -> None:
    parent, gate, _, _ = served
    gate.release.set()  # fsyncs return at once: replies, and "written" only for a slow one
    for x in (7, 8, 9):
        parent.send(x)
    replies: dict[int, Any] = {}
    while len(replies) < 3:
        message = parent.receive()
        if message[0] != "written":
            replies[message[0]] = message[1]
    assert replies == {1: ("ok", [7]), 2: ("ok", [8]), 3: ("ok", [9])}


def test_a_failed_fsync_fails_the_batches_waiting_and_ends_the_process(
    served: tuple[Parent, GatedSync, Path, list[int]],
) -> None:
    parent, gate, _, exit_code = served
    gate.error = OSError(errno.EIO, "Input/output error")
    parent.send(1)
    assert parent.receive() == ("written", 1)
    gate.release.set()
    number, reply = parent.receive()
    assert number == 1
    assert reply[0] == "failed"
    assert isinstance(reply[2], OSError)
    assert "fsync of the SQLite WAL failed" in str(reply[2])
    assert parent.closed()  # the process ends: nothing more commits on it
    assert parent.ended()
    assert exit_code == [1]


BLOCK_FIRST_FSYNC = """\
import os
import time

_gate = os.environ.get("JOBHOOK_TEST_FSYNC_GATE")
if _gate:
    _fdatasync = os.fdatasync
    _calls = []

    def _gated(fd):
        _calls.append(fd)
        if len(_calls) == 1:  # the first fsync waits for the test's word
            open(_gate + ".waiting", "w").close()
            deadline = time.monotonic() + 30
            while not os.path.exists(_gate) and time.monotonic() < deadline:
                time.sleep(0.005)
        _fdatasync(fd)

    os.fdatasync = _gated
"""


def event(job_id: str) -> Event:
    return Event(
        source="inbox",
        job_id=job_id,
        state=State.SUCCEEDED,
        provider_status="Completed",
        via="webhook",
        message_id=f"m-{job_id}",
    )


async def test_a_store_write_is_answered_while_an_earlier_fsync_still_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real writer process, its first fsync held (a sitecustomize on its PYTHONPATH): the
    # first webhook's batch commits and waits; the second commits beside it, and its fsync,
    # begun after both COMMITs, answers both. Were the next batch held back for the first
    # one's fsync, neither would be answered until the gate opens.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_FIRST_FSYNC)
    gate = tmp_path / "gate"
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("JOBHOOK_TEST_FSYNC_GATE", str(gate))

    store = SQLiteStore(tmp_path / "s.db", offload_at=1)  # every batch in the writer process
    await store.open()
    try:
        first = asyncio.create_task(store.ingest(event("first"), []))
        waiting = gate.with_name("gate.waiting")
        deadline = time.monotonic() + WAIT
        while not waiting.exists():  # the first batch committed; its fsync is held
            assert time.monotonic() < deadline, "the first fsync never began"
            await asyncio.sleep(0.005)
        second = await asyncio.wait_for(store.ingest(event("second"), []), WAIT)
        assert second.status == "accepted"
        assert (await asyncio.wait_for(first, WAIT)).status == "accepted"
        assert not gate.exists()  # answered with the first fsync still held
    finally:
        gate.touch()
        await store.close()
    reopened = SQLiteStore(tmp_path / "s.db")
    await reopened.open()
    try:
        for job_id in ("first", "second"):
            assert await reopened.get_job("inbox", job_id) is not None
    finally:
        await reopened.close()
