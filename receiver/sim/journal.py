"""The request log: every provider-API and blob request the simulator answered, in order."""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Iterator

Reason = Literal[
    "ok",
    "fault",
    "unauthorized",
    "rate_limited",
    "not_found",
    "bad_request",
    "expired",
    "bad_signature",
]


def key_hash(api_key: str) -> str:
    """How the log names an API key: a short sha256, never the key itself."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


def safe_url(url: str | None) -> str | None:
    """A URL fit for logs: no user info, query or fragment (they may hold tokens)."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, slots=True)
class Entry:
    """One answered request; ``t`` is the simulator clock's unix time when it arrived."""

    seq: int
    t: float
    method: str
    path: str
    status: int
    reason: Reason
    key: str | None
    retry_after: int | None = None
    elapsed_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class RequestLog:
    """An append-only, bounded log (the oldest entries go first when it is full)."""

    def __init__(self, limit: int = 200_000) -> None:
        self._entries: deque[Entry] = deque(maxlen=limit)
        self._seq = 0

    def record(self, **fields: Any) -> Entry:
        self._seq += 1
        entry = Entry(seq=self._seq, **fields)
        self._entries.append(entry)
        return entry

    def entries(self, since: int = 0, path: str | None = None) -> list[Entry]:
        """Entries after sequence number ``since``, optionally only those under ``path``."""
        return [
            e for e in self._entries if e.seq > since and (path is None or e.path.startswith(path))
        ]

    @property
    def last_seq(self) -> int:
        return self._seq

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)
