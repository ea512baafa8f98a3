"""A Document Intelligence batch analysis's result: every file's ``.ocr.json`` read from the
result container with Azure Storage's own protocol (Blob REST ``Get Blob``), assembled into one
JSON document.

The container is read with its own credential, never the Document Intelligence key: the SAS of
``result_container_url``, or (a URL without one) an Entra ID token for
``https://storage.azure.com/.default``. Only result URLs under that container are read, so the
credential goes nowhere else. The requests go through the job API's own ``httpx.AsyncClient``
(``[egress]``: proxy, CA bundle) within the source's rate budget; each blob is streamed in,
never held whole.

The document: ``{"operation", "status", "succeededCount", "failedCount", "skippedCount",
"files": [{"sourceUrl", "resultUrl", "status", "error", "result"}]}``, ``result`` being the
file's analyze result as the service wrote it, or null for a file that failed or was skipped.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from receiver.backoff import retry_after
from receiver.errors import ProviderError, ResultTooLargeError
from receiver.files import atomic_open
from receiver.providers.azure_auth import STORAGE_SCOPE
from receiver.providers.jobapi import JobNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from receiver.providers.azure_auth import TokenSource
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret

STORAGE_VERSION = "2024-11-04"
"""The Blob REST version spoken (``x-ms-version``; a bearer token needs one)."""


class BlobReader:
    """``Get Blob`` of the result container's blobs, with the container's credential."""

    def __init__(
        self,
        *,
        source: str,
        client: httpx.AsyncClient,
        limiter: RateLimiter,
        container: Secret | None,
        tokens: TokenSource | None,
        count: Callable[[str], None],
    ) -> None:
        self.source = source
        self._client = client
        self._limiter = limiter
        self._container = container
        self._tokens = tokens
        self._count = count

    def _where(self, result_url: str) -> tuple[str, dict[str, str]]:
        """The URL to ask and its headers; ProviderError for a blob outside the container."""
        if self._container is None:
            raise ProviderError(
                f"{self.source}: a batch's results are read from result_container_url, "
                "which the source's [azure] table does not set"
            )
        base = urlsplit(self._container.reveal())
        blob = urlsplit(result_url)
        inside = (
            (blob.scheme, blob.netloc) == (base.scheme, base.netloc)
            and blob.path.startswith(base.path.rstrip("/") + "/")
            and not blob.query
        )
        if not inside:
            raise ProviderError(
                f"{self.source}: result {blob.path[:200]!r} is not in the result container"
            )
        headers = {"x-ms-version": STORAGE_VERSION}
        if base.query:
            return f"{result_url}?{base.query}", headers
        return result_url, headers

    async def stream(self, result_url: str, write: Callable[[bytes], None]) -> None:
        """The blob's bytes to ``write`` as they arrive. 404 is JobNotFoundError (the results
        are gone); 429/5xx a ProviderError with the server's wait; other refusals say which."""
        url, headers = self._where(result_url)
        if self._tokens is not None and not urlsplit(url).query:
            headers |= await self._tokens.bearer(STORAGE_SCOPE)
        name = urlsplit(result_url).path
        await self._limiter.acquire(urgent=True)
        try:
            async with self._client.stream("GET", url, headers=headers) as response:
                self._count(f"blob_{response.status_code}")
                if response.status_code != 200:
                    await response.aread()
                    self._refuse(response, name)
                async for chunk in response.aiter_bytes():
                    write(chunk)
        except httpx.TransportError as exc:
            self._count("blob_error")
            raise ProviderError(f"{self.source}: result {name}: {type(exc).__name__}") from exc

    def _refuse(self, response: httpx.Response, name: str) -> None:
        status = response.status_code
        code = response.headers.get("x-ms-error-code", "")
        if status in (404, 410):
            raise JobNotFoundError(f"{self.source}: result {name} is gone ({status} {code})")
        wait = retry_after(response.headers)
        if status == 429:
            self._limiter.defer(wait if wait is not None else self._limiter.interval * 2)
        hint = " (the SAS or token cannot read the container)" if status in (401, 403) else ""
        raise ProviderError(
            f"{self.source}: result {name} answered {status} {code}{hint}".rstrip(),
            retry_after=wait,
        )


async def write_batch(
    reader: BlobReader, job_id: str, batch: dict[str, Any], dest: Path, *, limit: int
) -> tuple[str, int]:
    """The batch's files into ``dest`` as one JSON document, atomically: its sha256 and size."""
    digest, size = hashlib.sha256(), 0
    with atomic_open(dest) as out:

        def write(data: bytes) -> None:
            nonlocal size
            size += len(data)
            if size > limit:
                raise ResultTooLargeError(f"{reader.source}: the batch's results exceed {limit} "
                                          "bytes")  # fmt: skip
            digest.update(data)
            out.write(data)

        head = {"operation": job_id} | {k: v for k, v in batch.items() if k != "files"}
        write(_dumps(head)[:-1] + b',"files":[')
        files = batch.get("files")
        for index, item in enumerate(files if isinstance(files, list) else ()):
            entry = {k: item.get(k) for k in ("sourceUrl", "resultUrl", "status", "error")}
            write((b"," if index else b"") + _dumps(entry)[:-1] + b',"result":')
            url = item.get("resultUrl")
            if item.get("ok") and isinstance(url, str):
                await reader.stream(url, write)
            else:
                write(b"null")
            write(b"}")
        write(b"]}")
    return digest.hexdigest(), size


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
