"""A job API whose result is several downloads (Unstructured's files, Mistral's output and
error files), streamed one after another into a single JSON document on disk."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, BinaryIO

import httpx

from receiver.backoff import retry_after
from receiver.errors import ProviderError, ResultTooLargeError
from receiver.providers.jobapi import JobAPI, JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_RESULT_BYTES = 2 * 1024 * 1024 * 1024
"""An assembled result larger than this is refused (the default of ``[results] max_bytes``)."""
EXPIRED_STATUSES = frozenset({404, 410})
"""A download answered so is gone (retention passed, or never there): ``result_expired``."""


class JsonSink:
    """Bytes written to an open file while counting them and their sha256, within a cap."""

    def __init__(self, out: BinaryIO, *, source: str, limit: int = MAX_RESULT_BYTES) -> None:
        self._out = out
        self._source = source
        self._limit = limit
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self._limit:
            raise ResultTooLargeError(f"{self._source}: the result exceeds {self._limit} bytes")
        self._digest.update(data)
        self._out.write(data)

    def value(self, value: Any) -> None:
        """``value`` as compact JSON."""
        self.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()


class AssemblingJobAPI(JobAPI):
    """``JobAPI`` plus authenticated downloads, streamed within the same rate budget."""

    async def download(
        self, path: str, *, job_id: str, what: str, write: Callable[[bytes], None]
    ) -> None:
        """The body of ``GET path`` to ``write`` as it arrives, never whole in memory.

        404/410 is JobNotFoundError (the resolver's ``result_expired``); 429 and 5xx are a
        ProviderError carrying the server's ``Retry-After`` (a 429 also defers the budget).
        """
        await self.limiter.acquire(urgent=True)
        headers = self.provider.auth_headers(self._api_key.reveal())
        try:
            async with self._client.stream("GET", self._base + path, headers=headers) as response:
                self._count(str(response.status_code))
                self.limiter.observe(response.headers)
                if response.status_code != 200:
                    await response.aread()
                    self._refuse(response, job_id=job_id, what=what)
                async for chunk in response.aiter_bytes():
                    write(chunk)
        except httpx.TransportError as exc:
            self._count("error")
            raise ProviderError(f"{self.source}: {what}: {type(exc).__name__}") from exc

    async def download_lines(
        self, path: str, *, job_id: str, what: str, line: Callable[[bytes], None]
    ) -> None:
        """A JSON Lines download, each non-blank line (stripped) to ``line`` in turn."""
        pending = bytearray()

        def split(chunk: bytes) -> None:
            pending.extend(chunk)
            *lines, rest = bytes(pending).split(b"\n")
            pending[:] = rest
            for found in lines:
                if found.strip():
                    line(found.strip())

        await self.download(path, job_id=job_id, what=what, write=split)
        if pending.strip():
            line(bytes(pending).strip())

    def _refuse(self, response: httpx.Response, *, job_id: str, what: str) -> None:
        status = response.status_code
        if status in EXPIRED_STATUSES:
            raise JobNotFoundError(
                f"{self.source}: {what} of job {job_id!r} is gone ({status}): kept no longer"
            )
        wait = retry_after(response.headers)
        if status == 429:
            self.limiter.defer(wait if wait is not None else self.limiter.interval * 2)
        raise ProviderError(f"{self.source}: {what} answered {status}", retry_after=wait)
