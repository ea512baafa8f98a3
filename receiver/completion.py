"""The completion handed to every handler, and the ``Handler`` contract that receives it."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

CHUNK = 256 * 1024
_PLAIN_ID = re.compile(r"^[\x21-\x7e]{1,200}$")


@dataclass(frozen=True, slots=True)
class ResultInfo:
    """The fetched result: a file under ``results.dir``, its sha256 and size."""

    path: Path
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Completion:
    """A terminal job as handlers see it. ``result`` is None when there is none (or it failed)."""

    id: int
    source: str
    job_id: str
    state: str
    provider_status: str
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    result: ResultInfo | None = None
    created_at: float = 0.0
    error_code: str | None = None
    """The provider's machine-readable error code, or jobhook's own (``result_expired``...)."""
    fields: dict[str, float | None] = field(default_factory=dict)
    """The result's extracted fields and their confidence (0..1, or None), as the store keeps
    them (``GET /jobs/{source}/{job_id}`` shows the same)."""

    @property
    def message_id(self) -> str:
        """A stable id for this completion, so downstream consumers can de-duplicate."""
        return f"{self.source}:{self.job_id}:{self.state}"

    @property
    def delivery_id(self) -> str:
        """The id every handler sends downstream: HTTP ``webhook-id``, the Redis entry's ``id``,
        NATS ``Nats-Msg-Id`` and the AMQP ``message_id`` are all this, so a consumer reading
        both a queue and webhooks de-duplicates one completion as one.

        The rule: ``message_id`` itself when it is 1 to 200 printable ASCII characters without
        spaces (fit for an HTTP header and an AMQP short string alike), else ``jh_`` and the
        first 40 hex digits of its sha256: stable across retries and restarts.
        """
        message_id = self.message_id
        if _PLAIN_ID.match(message_id):
            return message_id
        digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()
        return "jh_" + digest[:40]

    def to_dict(self) -> dict[str, Any]:
        """The completion document: what the file handler writes and the http handler posts."""
        return {
            "id": self.message_id,
            "source": self.source,
            "job_id": self.job_id,
            "state": self.state,
            "provider_status": self.provider_status,
            "metadata": self.metadata,
            "result": (
                {"sha256": self.result.sha256, "bytes": self.result.bytes} if self.result else None
            ),
            "error": self.error,
            "error_code": self.error_code,
            "fields": self.fields,
        }

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode()

    async def iter_result(self, chunk_size: int = CHUNK) -> AsyncIterator[bytes]:
        """Stream the result file in chunks; nothing when there is no result."""
        if self.result is None:
            return
        async with await anyio.open_file(self.result.path, "rb") as fh:
            while chunk := await fh.read(chunk_size):
                yield chunk

    async def read_result(self) -> bytes | None:
        """The whole result in memory: only for results known to be small."""
        if self.result is None:
            return None
        return await anyio.Path(self.result.path).read_bytes()


@runtime_checkable
class Handler(Protocol):
    """What the dispatcher calls for every matching completion."""

    name: str

    async def handle(self, completion: Completion) -> None:
        """Deliver ``completion``; raise to have it retried with backoff."""
