"""Signature verification on the raw body, with the svix library, before anything is parsed.

Headers come from either family (``svix-*`` or ``webhook-*``); a source may hold several
secrets during rotation and any of them accepts. The shape of the headers is checked here so
that each failure gets its own reason; the cryptographic check itself is svix's.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from svix.webhooks import Webhook, WebhookVerificationError

from receiver.errors import VerificationError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from receiver.secret import Secret

TOLERANCE_SECONDS = 5 * 60
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_VERSION = re.compile(r"^v[0-9]+[a-z]?$")


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
    if len(message_id) > 256:
        raise VerificationError("invalid_message_id", "message id longer than 256 characters")
    return SignedHeaders(message_id, timestamp, signature)


class SvixVerifier:
    """Verifies Svix / Standard Webhooks signatures against one or more secrets."""

    def __init__(
        self, secrets: Sequence[Secret], *, clock: Callable[[], float] = time.time
    ) -> None:
        if not secrets:
            raise ValueError("a verifier needs at least one secret")
        self._webhooks = [Webhook(secret.reveal()) for secret in secrets]
        self._clock = clock

    def __repr__(self) -> str:
        return f"SvixVerifier(secrets={len(self._webhooks)})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> SignedHeaders:
        """Return the signed headers when ``body`` verifies; VerificationError otherwise."""
        signed = read_headers(headers)
        self._check_timestamp(signed.timestamp)
        _check_signature_shape(signed.signature)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise VerificationError("body_not_utf8", "the body is not UTF-8") from None
        std_headers = {
            "webhook-id": signed.message_id,
            "webhook-timestamp": signed.timestamp,
            "webhook-signature": signed.signature,
        }
        for webhook in self._webhooks:
            try:
                webhook.verify(text, std_headers)
            except WebhookVerificationError:
                continue
            except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
                raise VerificationError(
                    "malformed_signature", "the signature header is malformed", status_code=400
                ) from exc
            return signed
        raise VerificationError("bad_signature", "no matching signature", status_code=401)

    def _check_timestamp(self, raw: str) -> None:
        if not _TIMESTAMP.match(raw):
            raise VerificationError("invalid_timestamp", "timestamp is not integer seconds")
        skew = int(raw) - self._clock()
        if skew < -TOLERANCE_SECONDS:
            raise VerificationError("stale_timestamp", "timestamp too old", status_code=401)
        if skew > TOLERANCE_SECONDS:
            raise VerificationError("future_timestamp", "timestamp too new", status_code=401)


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
