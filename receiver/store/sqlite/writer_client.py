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
    """The parent's end: starts the process, sends it batches, stops it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keep_fds: tuple[int, ...] = ()
        """Descriptors the process inherits (the store's ownership lock, so it outlives us)."""
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

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

    async def run(self, data: bytes) -> Reply:
        """Send one batch (``encode``'s bytes), return the process's reply; WriterGoneError
        when the process is gone (the batch may or may not have committed)."""
        if self._writer is None:
            raise WriterGoneError("the SQLite writer process is not running")
        try:
            self._writer.write(data)
            return await self._receive()
        except (ConnectionError, OSError) as exc:
            raise WriterGoneError(f"the SQLite writer process is gone: {exc}") from exc
        except asyncio.CancelledError:
            # Its reply would be read as the next batch's: let this process go (it exits
            # once its batch is done), and the next batch starts another.
            self._abandon()
            raise

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
        """Close the socket (the process finishes its batch and exits), then reap it."""
        await self._close_socket()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
