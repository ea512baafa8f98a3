"""A result body's way to disk: decoded, counted against the cap, hashed and written per read.

``BodySink`` takes each read as the download thread gets it, while it is still in the CPU's
cache; ``start_writeback`` keeps the disk busy while the body arrives instead of at the fsync.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zlib
from typing import TYPE_CHECKING, Any

from receiver.errors import FetchError, ResultTooLargeError

if TYPE_CHECKING:
    from typing import BinaryIO

BUFFER_BYTES = 1024 * 1024
"""The most one read takes, and one decode gives out."""
WRITEBACK_BYTES = 32 * 1024 * 1024
"""Bytes written between two starts of their writeback (``start_writeback``): a start is kernel
work in the saving thread, and with the body arriving on the other core a start every few MiB
cost a large download much of its speed; dirty pages stay within a few tens of MiB either
way."""
_DONTNEED: int | None = getattr(os, "POSIX_FADV_DONTNEED", None)  # absent on macOS
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The content codings decoded, by zlib's ``wbits``: those httpx decoded here before."""


class BodySink:
    """Decodes, counts, hashes and writes the body as it arrives; ``finish`` makes it durable."""

    def __init__(self, fh: BinaryIO, limit: int, wbits: int | None, host: str) -> None:
        self.digest = hashlib.sha256()
        self.size = 0
        self._fh = fh
        self._limit = limit
        self._host = host
        self._decoder = zlib.decompressobj(wbits) if wbits is not None else None
        self._unsynced = 0

    def keep(self, data: bytes) -> None:
        if self._decoder is None:
            self._write(data)
            return
        # Decoded a buffer at a time: a small body that inflates without end is refused at the
        # limit, never held whole.
        chunk: Any = data
        while chunk:
            try:
                plain = self._decoder.decompress(chunk, BUFFER_BYTES)
            except zlib.error as exc:
                raise FetchError(f"the result at {self._host} cannot be decoded: {exc}") from None
            self._write(plain)
            chunk = self._decoder.unconsumed_tail

    def finish(self) -> None:
        if self._decoder is not None:
            self._write(self._decoder.flush())
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def _write(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        if self.size > self._limit:
            raise ResultTooLargeError(
                f"the result at {self._host} exceeds results.max_bytes ({self._limit})"
            )
        self.digest.update(data)
        self._fh.write(data)
        self._unsynced += len(data)
        if self._unsynced >= WRITEBACK_BYTES:
            start_writeback(self._fh, self._unsynced)
            self._unsynced = 0


def decoder_bits(content_encoding: str | None) -> int | None:
    """How to decode a body sent with ``content_encoding``; None to keep it as sent.

    The request asks for ``identity``; a server that compresses anyway (an object stored with
    ``Content-Encoding: gzip``) gets its gzip or deflate decoded, as httpx did. Other codings
    are kept as sent, as httpx kept those it had no decoder for.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    return _DECODERS.get(codings[0]) if len(codings) == 1 else None


def start_writeback(fh: BinaryIO, written: int) -> None:
    """Send the ``written`` bytes just written on to the disk now, not at the final fsync.

    Left alone, the kernel keeps a result's pages dirty until the fsync (its background
    writeback starts only at ``dirty_background_ratio`` of memory), so the disk idles while the
    body arrives and then writes all of it at the end. ``POSIX_FADV_DONTNEED`` on dirty pages
    starts their writeback (Linux); pages still being written are not dropped, so the result
    stays cached for a handler that reads it next, only clean. The disk works while the
    download runs (instead of all at once at the end, which is slower), and a multi-GiB result
    does not fill a sidecar's
    memory limit with dirty pages, which the kernel cannot drop. Advice only: where it is
    missing or refused, nothing changes.
    """
    if written <= 0 or _DONTNEED is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fh.flush()
        end = fh.tell()
        os.posix_fadvise(fh.fileno(), end - written, written, _DONTNEED)
