"""Result blobs: deterministic content streamed in chunks, behind expiring presigned URLs."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from receiver.sim.shapes.base import ResultLink

if TYPE_CHECKING:
    from collections.abc import Iterator

    from receiver.sim.clock import Clock
    from receiver.sim.shapes.base import BlobKind

CHUNK = 1 << 20
_HEAD = b'{"type":"full","chunks":[{"content":"Simulated result","blocks":[]}'
_UNIT = (
    b',{"content":"' + b"Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 16 + b'",'
    b'"blocks":[{"type":"Text","confidence":"high"}]}'
)
_TAIL = b"]}"
MIN_SIZE = len(_HEAD) + len(_TAIL)
_STAMP = (2026, 1, 1, 0, 0, 0)
# What Knowhere's SDK (2.2.1) reads from a result zip: manifest.json (required), chunks.json and
# full.md. The manifest carries no checksum: the SDK would compare it with the sha256 of the
# whole zip the manifest is inside, which no zip can satisfy; the job answer's result_checksum
# covers the zip instead.
_MEMBERS = (
    ("manifest.json", b'{"version":"2.0","source_file_name":"document.pdf",'
     b'"processing_date":"2026-01-01T00:00:00Z",'
     b'"files":{"chunks":"chunks.json","markdown":"full.md"}}'),
    ("chunks.json", b'[{"chunk_id":"c1","type":"text","content":"Simulated result",'
     b'"path":"Document/Page 1"}]'),
    ("full.md", b"# Simulated result\n"),
)  # fmt: skip
Check = Literal["ok", "expired", "bad_signature"]


@dataclass(frozen=True, slots=True)
class BlobSpec:
    """What a blob holds: a JSON result of ``size`` bytes, bare or as the one member of a zip."""

    kind: BlobKind
    size: int

    @property
    def media_type(self) -> str:
        return "application/zip" if self.kind == "zip" else "application/json"


@dataclass(frozen=True, slots=True)
class Digest:
    sha256: str
    size: int


def json_chunks(size: int) -> Iterator[bytes]:
    """Valid JSON of exactly ``size`` bytes (at least MIN_SIZE), a repeated unit padded out."""
    units, pad = divmod(max(size - MIN_SIZE, 0), len(_UNIT))
    per_batch = CHUNK // len(_UNIT)
    batch = _UNIT * per_batch
    yield _HEAD
    full, rest = divmod(units, per_batch)
    for _ in range(full):
        yield batch
    if rest:
        yield _UNIT * rest
    if pad:
        yield b" " * pad
    yield _TAIL


class _Sink:
    """A write-only file for zipfile: it forgets what it hands out, so nothing accumulates."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes, /) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def drain(self) -> Iterator[bytes]:
        parts, self._parts = self._parts, []
        yield from parts


def zip_chunks(size: int) -> Iterator[bytes]:
    """A stored (uncompressed) zip: Knowhere's small members, then ``result.json`` of ``size``
    bytes, streamed."""
    sink = _Sink()
    member = zipfile.ZipInfo("result.json", date_time=_STAMP)
    member.file_size = max(size, MIN_SIZE)
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED) as archive:
        for name, data in _MEMBERS:
            archive.writestr(zipfile.ZipInfo(name, date_time=_STAMP), data)
        yield from sink.drain()
        with archive.open(member, "w") as entry:
            for chunk in json_chunks(size):
                entry.write(chunk)
                yield from sink.drain()
        yield from sink.drain()
    yield from sink.drain()


def chunks(spec: BlobSpec, limit: int | None = None) -> Iterator[bytes]:
    """The blob's bytes in chunks of about a MiB; only the first ``limit`` bytes if given."""
    source = zip_chunks(spec.size) if spec.kind == "zip" else json_chunks(spec.size)
    if limit is None:
        yield from source
        return
    left = limit
    for chunk in source:
        if left <= 0:
            break
        yield chunk[:left]
        left -= len(chunk)


def measure(spec: BlobSpec) -> Digest:
    """The sha256 and length of a blob, computed by streaming it once."""
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks(spec):
        digest.update(chunk)
        size += len(chunk)
    return Digest(digest.hexdigest(), size)


class BlobHost:
    """Mints and checks presigned URLs, and remembers each blob kind's digest."""

    def __init__(self, clock: Clock, ttl: float) -> None:
        self._clock = clock
        self._ttl = ttl
        self._key = secrets.token_bytes(32)
        self._digests: dict[BlobSpec, Digest] = {}
        self._computing: dict[BlobSpec, asyncio.Task[Digest]] = {}

    def _sign(self, blob_id: str, expires: int) -> str:
        return hmac.new(self._key, f"{blob_id}\n{expires}".encode(), "sha256").hexdigest()

    def presign(self, base_url: str, blob_id: str, sha256: str | None = None) -> ResultLink:
        """A fresh URL valid for the configured TTL from now."""
        expires = int(self._clock.time() + self._ttl)
        url = f"{base_url}/blobs/{blob_id}?expires={expires}&sig={self._sign(blob_id, expires)}"
        return ResultLink(url=url, expires=expires, blob_id=blob_id, sha256=sha256)

    def check(self, blob_id: str, expires: str, sig: str) -> Check:
        """Whether a presented URL is genuine and still valid (S3 checks the signature first)."""
        if not expires.isdigit() or not hmac.compare_digest(self._sign(blob_id, int(expires)), sig):
            return "bad_signature"
        return "expired" if self._clock.time() > int(expires) else "ok"

    async def length(self, spec: BlobSpec) -> int:
        """The blob's size in bytes; a zip's is known once it has been built."""
        if spec.kind == "json":
            return max(spec.size, MIN_SIZE)
        return (await self.digest(spec)).size

    async def digest(self, spec: BlobSpec) -> Digest:
        """The blob's digest, computed once per kind and size in a worker thread."""
        known = self._digests.get(spec)
        if known is not None:
            return known
        task = self._computing.get(spec)
        if task is None:
            task = asyncio.create_task(asyncio.to_thread(measure, spec))
            self._computing[spec] = task
        try:
            result = await asyncio.shield(task)
        finally:
            if task.done():
                self._computing.pop(spec, None)
        self._digests[spec] = result
        return result
