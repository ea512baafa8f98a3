"""Who owns an embedded store: an exclusive ``flock`` on a file beside the database.

The lock is held by the process that opened the store and by its writer process (which
inherits the descriptor), so it is free only once both are gone. Whoever takes it knows that
no other process is using the store, and so that every claim left in it belongs to a process
that died: it can take them back at once instead of waiting out their leases. The file holds
the owner's pid, so a newcomer can tell a live owner (it gives up at once and leaves the
claims alone) from a dead one whose writer is still finishing (it waits a little).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

WAIT_FOR_ORPHAN = 5.0
"""How long to wait for a dead owner's writer process to finish its batch and exit."""

_HELD: set[Path] = set()  # locks this process holds (another store object of ours is no orphan)


class StoreLock:
    """The owner's lock on ``<database>.lock``; ``acquire`` tells whether this process has it."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".lock")
        self.fd: int | None = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def acquire(self, wait: float = WAIT_FOR_ORPHAN) -> bool:
        """Take the lock; False when a live process holds it (or a dead one's writer, still
        running after ``wait`` seconds)."""
        if self.path.resolve() in _HELD:
            return False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if _owner_alive(fd) or time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.02)
                continue
            break
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        _HELD.add(self.path.resolve())
        return True

    def release(self) -> None:
        """Let go (closing the descriptor; the writer's copy closes when it exits)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
            _HELD.discard(self.path.resolve())


def _owner_alive(fd: int) -> bool:
    """Whether the pid written in the lock file is a running process other than this one."""
    try:
        pid = int(os.pread(fd, 32, 0).decode() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():  # a container's restart may reuse the dead owner's pid
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
