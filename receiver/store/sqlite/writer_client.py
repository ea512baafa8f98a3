"""The parent's end of the SQLite writer process (``receiver.store.sqlite.writer``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from receiver.store.sqlite.writer import HEADER

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.store.sqlite.writer import Op, Reply

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
_ROOT = str(Path(__file__).resolve().parents[2])  # where the ``receiver`` package lives


class WriterGoneError(Exception):
    """The writer process cannot be reached: it exited, or never started."""


def encode(batch: Sequence[Op]) -> bytes:
    """One batch as the frame the writer process reads; pickle's error when an operation or
    its arguments do not pickle."""
    data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(HEADER, "big") + data


class WriterProcess:
    """The parent's end: starts the process, sends it batches, stops it.

    ``send`` hands a batch over and returns two futures: the first resolves when the batch has
    committed (the next may be sent), the second with its reply once it is on disk
    (``receiver.store.sqlite.writer.Syncer``). A reader task reads the process's frames and
    settles them by batch number; when the process goes, every batch not yet answered fails
    with WriterGoneError (it may or may not have committed: nothing of it was acknowledged).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keep_fds: tuple[int, ...] = ()
        """Descriptors the process inherits (the store's ownership lock, so it outlives us)."""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._listener: asyncio.Task[None] | None = None
        self._sent = 0  # batches sent to this process (it numbers them the same way)
        self._waiting: dict[int, tuple[asyncio.Future[None], asyncio.Future[Reply]]] = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._writer is not None and self._proc.returncode is None

    async def start(self) -> None:
        """Start the process and wait until it has opened the database; WriterGoneError or
        the database's own error when it cannot."""
        await self.stop()
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "receiver.store.sqlite.writer", str(theirs.fileno()),
                str(self.path), pass_fds=(theirs.fileno(), *self.keep_fds),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
                start_new_session=True,  # signals to the service's group: writer.IGNORED_SIGNALS
            )  # fmt: skip
        except OSError as exc:
            ours.close()
            raise WriterGoneError(f"cannot start the SQLite writer process: {exc}") from exc
        finally:
            theirs.close()
        self._reader, self._writer = await asyncio.open_connection(sock=ours)
        try:
            reply = await asyncio.wait_for(self._receive(), START_TIMEOUT)
        except (WriterGoneError, TimeoutError):
            await self.stop()
            raise WriterGoneError("the SQLite writer process did not start") from None
        if reply[0] != "ok":
            await self.stop()
            raise reply[2]
        self._sent = 0
        self._listener = asyncio.create_task(self._listen(), name="sqlite-writer-replies")

    def send(self, data: bytes) -> tuple[asyncio.Future[None], asyncio.Future[Reply]]:
        """Send one batch (``encode``'s bytes): (committed, reply) futures, as the class says.
        WriterGoneError when the process is not running (nothing was sent)."""
        if self._writer is None or self._listener is None or self._listener.done():
            raise WriterGoneError("the SQLite writer process is not running")
        loop = asyncio.get_running_loop()
        futures = (loop.create_future(), loop.create_future())
        self._sent += 1
        self._waiting[self._sent] = futures
        try:
            self._writer.write(data)
        except (ConnectionError, OSError) as exc:
            self._waiting.pop(self._sent)
            raise WriterGoneError(f"the SQLite writer process is gone: {exc}") from exc
        return futures

    async def _listen(self) -> None:
        """Settle each batch as the process answers it; fail the rest when it goes."""
        try:
            while True:
                message = await self._receive()
                if message[0] == "written":
                    futures = self._waiting.get(message[1])
                    if futures is not None and not futures[0].done():
                        futures[0].set_result(None)
                    continue
                futures = self._waiting.pop(message[0], None)
                if futures is not None:
                    committed, reply = futures
                    if not committed.done():
                        committed.set_result(None)
                    if not reply.done():
                        reply.set_result(message[1])
        except WriterGoneError as exc:
            self._fail_waiting(exc)
        except asyncio.CancelledError:
            self._fail_waiting(WriterGoneError("the SQLite writer process was stopped"))
            raise

    def _fail_waiting(self, exc: WriterGoneError) -> None:
        waiting, self._waiting = self._waiting, {}
        for futures in waiting.values():
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
                    future.exception()  # retrieved: a batch nobody awaits any more is no error

    def _abandon(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()

    async def _receive(self) -> Reply:
        assert self._reader is not None
        try:
            header = await self._reader.readexactly(HEADER)
            data = await self._reader.readexactly(int.from_bytes(header, "big"))
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            await self._close_socket()
            raise WriterGoneError(
                f"the SQLite writer process exited ({await self._exit()})"
            ) from exc
        reply: Reply = pickle.loads(data)  # noqa: S301 (the child's, over a private socket)
        return reply

    async def _exit(self) -> str:
        """How the process ended, once it has (it closed its socket: that is soon)."""
        code = None
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                code = await asyncio.wait_for(self._proc.wait(), 1.0)
        if code is None:
            return "exit status not known"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    async def _close_socket(self) -> None:
        writer = self._writer
        self._abandon()
        if writer is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def stop(self) -> None:
        """Close the socket (the process finishes its batches and exits), then reap it."""
        listener, self._listener = self._listener, None
        await self._close_socket()
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
