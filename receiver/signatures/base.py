"""The contract every signature scheme implements, and the checks the schemes share.

Every scheme implements ``Verifier``; each failure is a VerificationError with its own reason
(400 for malformed input, 401 for a wrong or stale signature): headers read from either family
(``svix-*`` or ``webhook-*``), message ids, timestamps within the tolerance, UTF-8 bodies and
``whpk_`` public keys are checked here, the same way for every scheme.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from receiver.errors import VerificationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    import httpx
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


TOLERANCE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
MAX_MESSAGE_ID = 256
PUBLIC_KEY_PREFIX = "whpk_"


@dataclass(frozen=True, slots=True)
class Verified:
    """What a verified delivery tells the endpoint: its message id (the dedupe key), send time."""

    message_id: str
    timestamp: int | None = None
    handled: str | None = None
    """Set when the scheme answered a control message itself (an SNS subscription handshake):
    the word the endpoint answers with; there is no event to ingest."""


class Verifier(Protocol):
    """A signature scheme bound to one source's secrets; header names are looked up lower-case."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """The delivery's message id (and send time) when it verifies; VerificationError else."""
        ...


class AsyncVerifier:
    """A scheme that reaches the network to verify (SNS fetches its signing certificate): the
    service ``attach``es the client it uses, at start and to each verifier a reload builds."""

    def attach(
        self, client: httpx.AsyncClient, acquire: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Use ``client`` for what verifying fetches, each request after ``acquire()`` (the
        source's rate budget, when it has one)."""
        raise NotImplementedError

    async def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """As ``Verifier.verify``; RetryableError when what it needs cannot be fetched now."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class SignedHeaders:
    """The three Standard Webhooks headers, whichever family they came in."""

    message_id: str
    timestamp: str
    signature: str


def _header(headers: Mapping[str, str], name: str) -> str:
    return headers.get(f"svix-{name}") or headers.get(f"webhook-{name}") or ""


def read_headers(headers: Mapping[str, str]) -> SignedHeaders:
    """Pick the signed headers (svix-* first, as svix does); 400 when any is missing."""
    message_id = _header(headers, "id")
    timestamp = _header(headers, "timestamp")
    signature = _header(headers, "signature")
    missing = [n for n, v in (("id", message_id), ("timestamp", timestamp),
                              ("signature", signature)) if not v]  # fmt: skip
    if missing:
        raise VerificationError(
            "missing_headers", f"missing webhook-/svix- header(s): {', '.join(missing)}"
        )
    check_message_id(message_id)
    return SignedHeaders(message_id, timestamp, signature)


def check_message_id(message_id: str) -> None:
    """A message id is a dedupe key: 400 when it is unreasonably long."""
    if len(message_id) > MAX_MESSAGE_ID:
        raise VerificationError(
            "invalid_message_id", f"message id longer than {MAX_MESSAGE_ID} characters"
        )


def check_timestamp(raw: str, now: float, tolerance: float = TOLERANCE_SECONDS) -> int:
    """Integer seconds within ``tolerance`` of ``now``: 400 when malformed, 401 when off."""
    if not _TIMESTAMP.match(raw):
        raise VerificationError("invalid_timestamp", "timestamp is not integer seconds")
    skew = int(raw) - now
    if skew < -tolerance:
        raise VerificationError("stale_timestamp", "timestamp too old", status_code=401)
    if skew > tolerance:
        raise VerificationError("future_timestamp", "timestamp too new", status_code=401)
    return int(raw)


def require_utf8(body: bytes) -> str:
    """The body as text; 400 when it is not UTF-8 (JSON webhooks always are)."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("body_not_utf8", "the body is not UTF-8") from None


def parse_public_key(value: str, index: int = 0) -> Ed25519PublicKey:
    """A ``whpk_`` Standard Webhooks public key: base64 of 32 raw ed25519 bytes; ValueError else.

    The message names the key by its index, never its text (a secret may be pasted by mistake).
    ``cryptography`` is imported here, by the sources that have public keys: it is a large
    share of the service's memory, for a scheme few sources use.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if value.startswith("whsk_"):
        raise ValueError(
            f"public key #{index} is a whsk_ secret key: configure its whpk_ public key instead"
        )
    if value.startswith("whsec_"):
        raise ValueError(
            f"public key #{index} is a whsec_ signing secret; move it from public_keys to secrets"
        )
    if not value.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError(f"public key #{index} must start with {PUBLIC_KEY_PREFIX!r}")
    try:
        raw = base64.b64decode(value.removeprefix(PUBLIC_KEY_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"public key #{index} is not valid base64") from None
    if len(raw) != 32:
        raise ValueError(f"public key #{index} is {len(raw)} bytes, an ed25519 key is 32")
    return Ed25519PublicKey.from_public_bytes(raw)
