"""Svix / Standard Webhooks: ``v1`` HMAC entries checked by svix, ``v1a`` ed25519 entries by us.

A source may hold several secrets during rotation and any of them accepts. The shape of the
headers is checked first so that each failure gets its own reason; the cryptographic check
itself is svix's (the ``standardwebhooks`` engine that svix's ``Webhook`` wraps) for ``v1``
entries, and ``cryptography``'s for ``v1a`` entries, which svix skips, against ``whpk_`` keys.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from typing import TYPE_CHECKING, ClassVar

# svix.webhooks.Webhook maps svix-* headers onto standardwebhooks' Webhook (a dependency svix
# ships with) and calls its verify; this module hands it webhook-* headers already. Importing
# svix.webhooks first runs svix/__init__, which loads svix's whole REST API client, the
# largest part of jobhook's start, for nothing the receiver uses; so the class svix delegates
# to is imported directly. tests/signatures/test_svix.py pins that both are the same check.
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from receiver.errors import VerificationError
from receiver.signatures.base import (
    Verified,
    check_timestamp,
    parse_public_key,
    read_headers,
    require_utf8,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from receiver.secret import Secret
    from receiver.signatures.base import SignedHeaders

_VERSION = re.compile(r"^v[0-9]+[a-z]?$")


class SvixVerifier:
    """Verifies Svix / Standard Webhooks signatures: ``v1`` with secrets, ``v1a`` with keys."""

    scheme: ClassVar[str] = "svix"

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


def check_svix_secret(value: str, index: int = 0) -> None:
    """A Svix / Standard Webhooks secret: ``whsec_`` + base64 of at least 16 bytes."""
    if value.startswith("whpk_"):
        raise ValueError(
            f"secret #{index} is a whpk_ public key; move it from secrets to public_keys"
        )
    if value.startswith("whsk_"):
        raise ValueError(
            f"secret #{index} is a whsk_ private signing key, which stays with the sender; "
            "put its whpk_ public key under public_keys"
        )
    raw = value.removeprefix("whsec_")
    try:
        decoded = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            f"secret #{index} is not a whsec_ base64 secret; copy the webhook signing secret "
            "from the provider's dashboard as it is (whsec_...)"
        ) from None
    if len(decoded) < 16:
        raise ValueError(
            f"secret #{index} is too short ({len(decoded)} bytes, need 16); copy the whole "
            "signing secret from the provider"
        )
