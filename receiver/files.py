"""File names derived from untrusted ids, and atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_PLAIN = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}$")


def safe_name(value: str) -> str:
    """A file name for ``value`` that can never leave its directory (no '/', '..', NUL)."""
    if _PLAIN.match(value) and value not in {".", ".."}:
        return value
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", value)[:80]
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{cleaned}~{digest}"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
