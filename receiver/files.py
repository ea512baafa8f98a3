"""File names derived from untrusted ids, and atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_PLAIN = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}$")


def safe_name(value: str) -> str:
    """A file name for ``value`` that can never leave its directory (no '/', '..', NUL)."""
    if _PLAIN.match(value) and value not in {".", ".."}:
        return value
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", value)[:80]
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{cleaned}~{digest}"


@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[BinaryIO]:
    """A file to write ``path`` through: it replaces ``path`` only if the block completes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one."""
    with atomic_open(path) as fh:
        fh.write(data)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; some platforms cannot open a directory: best effort.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
