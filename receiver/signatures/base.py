"""Signature verification on the raw body, before anything is parsed: the contract and Svix.

Every scheme implements ``Verifier``; each failure is a VerificationError with its own reason
(400 for malformed input, 401 for a wrong or stale signature). Svix / Standard Webhooks headers
come from either family (``svix-*`` or ``webhook-*``); a source may hold several secrets during
rotation and any of them accepts. The shape of the headers is checked here so that each failure
gets its own reason; the cryptographic check itself is svix's (the ``standardwebhooks`` engine
that svix's ``Webhook`` wraps) for ``v1`` (HMAC) entries and
``cryptography``'s for ``v1a`` (ed25519) entries, which svix skips, against ``whpk_`` public
keys. The HMAC schemes of providers that do not sign through Svix are in ``receiver.signatures``.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

# svix.webhooks.Webhook maps svix-* headers onto standardwebhooks' Webhook (a dependency svix
# ships with) and calls its verify; this module hands it webhook-* headers already. Importing
# svix.webhooks first runs svix/__init__, which loads svix's whole REST API client, the
# largest part of jobhook's start, for nothing the receiver uses; so the class svix delegates
# to is imported directly. tests/test_verify.py pins that both are the same check.
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from receiver.errors import VerificationError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from receiver.secret import Secret

TOLERANCE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_VERSION = re.compile(r"^v[0-9]+[a-z]?$")
MAX_MESSAGE_ID = 256
PUBLIC_KEY_PREFIX = "whpk_"


@dataclass(frozen=True, slots=True)
class Verified:
    """What a verified delivery tells the endpoint: its message id (the dedupe key), send time."""

    message_id: str
    timestamp: int | None = None


class Verifier(Protocol):
    """A signature scheme bound to one source's secrets; header names are looked up lower-case."""

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """The delivery's message id (and send time) when it verifies; VerificationError else."""
        ...


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
    ``cryptography`` is imported here, by the sources that have public keys: it is ~9 MB of
    the service's memory, for a scheme few sources use.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if value.startswith("whsk_"):
        raise ValueError(
            f"public key #{index} is a whsk_ secret key: configure its whpk_ public key instead"
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


class SvixVerifier:
    """Verifies Svix / Standard Webhooks signatures: ``v1`` with secrets, ``v1a`` with keys."""

    def __init__(
        self,
        secrets: Sequence[Secret],
        *,
        public_keys: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not secrets and not public_keys:
            raise ValueError("a verifier needs at least one secret or public key")
        self._webhooks = [Webhook(secret.reveal()) for secret in secrets]
        self._public_keys = [parse_public_key(key, i) for i, key in enumerate(public_keys)]
        self._clock = clock

    def __repr__(self) -> str:
        keys = f", public_keys={len(self._public_keys)}" if self._public_keys else ""
        return f"SvixVerifier(secrets={len(self._webhooks)}{keys})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """Return the message id and timestamp when ``body`` verifies; VerificationError else."""
        signed = read_headers(headers)
        timestamp = check_timestamp(signed.timestamp, self._clock())
        _check_signature_shape(signed.signature)
        text = require_utf8(body)
        std_headers = {
            "webhook-id": signed.message_id,
            "webhook-timestamp": signed.timestamp,
            "webhook-signature": signed.signature,
        }
        for webhook in self._webhooks:
            try:
                webhook.verify(text, std_headers, json_parse=False)
            except WebhookVerificationError:
                continue
            except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
                raise VerificationError(
                    "malformed_signature", "the signature header is malformed", status_code=400
                ) from exc
            return Verified(signed.message_id, timestamp)
        if self._public_keys and self._v1a_matches(body, signed):
            return Verified(signed.message_id, timestamp)
        raise VerificationError("bad_signature", "no matching signature", status_code=401)

    def _v1a_matches(self, body: bytes, signed: SignedHeaders) -> bool:
        """Whether any ``v1a`` entry is an ed25519 signature of the delivery by a known key."""
        from cryptography.exceptions import InvalidSignature

        message = f"{signed.message_id}.{signed.timestamp}.".encode() + body
        for entry in signed.signature.split(" "):
            version, _, value = entry.partition(",")
            if version != "v1a":
                continue
            signature = base64.b64decode(value)  # its shape was checked before
            for key in self._public_keys:
                try:
                    key.verify(signature, message)
                except InvalidSignature:
                    continue
                return True
        return False


def _check_signature_shape(header: str) -> None:
    """Every space-separated entry must be ``vN,<base64>``, as the spec draws it."""
    for entry in header.split(" "):
        version, comma, value = entry.partition(",")
        if not comma or not _VERSION.match(version) or not value or "," in value:
            raise VerificationError(
                "malformed_signature", "signature entries must be 'v1,<base64>'"
            )
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise VerificationError(
                "malformed_signature", "signature is not valid base64"
            ) from None
