"""The providers' own HMAC schemes, for providers that do not sign through Svix.

    docurift    hex HMAC-SHA256 of "{timestamp}.{raw body}" in X-DocuRift-Signature (an optional
                "sha256=" prefix), X-DocuRift-Timestamp within 5 minutes, X-DocuRift-Event-Id as
                the message id
    docextract  hex HMAC-SHA256 of the raw body in X-DocExtract-Signature; no timestamp, so the
                message id is the body's sha256 and a replay is a duplicate

The secret is the HMAC key as UTF-8 text (not base64-decoded, even when it looks like
``whsec_...``), as both providers' own examples use it. Comparisons are constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import TYPE_CHECKING, ClassVar

from receiver.errors import VerificationError
from receiver.signatures.base import Verified, check_message_id, check_timestamp, require_utf8

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from receiver.secret import Secret

MIN_HMAC_SECRET = 16
_HEX_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")


def check_hmac_secret(value: str, index: int = 0) -> None:
    """An HMAC secret: at least 16 characters (the message never contains the value)."""
    if value.startswith("whpk_"):
        raise ValueError(
            f"secret #{index} is a whpk_ public key, which only signature 'svix' takes (under "
            "public_keys); give this source the provider's HMAC signing secret"
        )
    if len(value) < MIN_HMAC_SECRET:
        raise ValueError(
            f"secret #{index} is too short ({len(value)} characters, need {MIN_HMAC_SECRET}); "
            "copy the whole signing secret from the provider"
        )


class HmacKeys:
    """Several HMAC-SHA256 keys (rotation); a signature verifies if any of them made it."""

    def __init__(self, secrets: Sequence[Secret]) -> None:
        if not secrets:
            raise ValueError("a verifier needs at least one secret")
        self._keys = [secret.reveal().encode("utf-8") for secret in secrets]

    def __len__(self) -> int:
        return len(self._keys)

    def match(self, message: bytes, signature: bytes) -> bool:
        return any(
            hmac.compare_digest(hmac.new(key, message, hashlib.sha256).digest(), signature)
            for key in self._keys
        )


def read_hex_signature(value: str) -> bytes:
    """A hex SHA-256 digest, optionally prefixed ``sha256=``; 400 when it is anything else."""
    if value[:7].lower() == "sha256=":
        value = value[7:]
    if not _HEX_DIGEST.match(value):
        raise VerificationError(
            "malformed_signature", "the signature must be 64 hex digits (optionally 'sha256=')"
        )
    return bytes.fromhex(value)


def _missing(names: Sequence[str]) -> VerificationError:
    return VerificationError("missing_headers", f"missing header(s): {', '.join(names)}")


class DocuRiftVerifier:
    """DocuRift: HMAC-SHA256 over ``"{timestamp}.{raw body}"`` with a 5 minute tolerance."""

    scheme: ClassVar[str] = "docurift"
    SIGNATURE = "x-docurift-signature"
    TIMESTAMP = "x-docurift-timestamp"
    EVENT_ID = "x-docurift-event-id"

    def __init__(
        self, secrets: Sequence[Secret], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._keys = HmacKeys(secrets)
        self._clock = clock

    def __repr__(self) -> str:
        return f"DocuRiftVerifier(secrets={len(self._keys)})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """The event id and timestamp when ``body`` verifies; VerificationError otherwise."""
        values = {name: headers.get(name) or "" for name in
                  (self.EVENT_ID, self.TIMESTAMP, self.SIGNATURE)}  # fmt: skip
        missing = [name for name, value in values.items() if not value]
        if missing:
            raise _missing(missing)
        event_id, raw_timestamp = values[self.EVENT_ID], values[self.TIMESTAMP]
        check_message_id(event_id)
        timestamp = check_timestamp(raw_timestamp, self._clock())
        signature = read_hex_signature(values[self.SIGNATURE])
        require_utf8(body)
        if not self._keys.match(raw_timestamp.encode("ascii") + b"." + body, signature):
            raise VerificationError("bad_signature", "no matching signature", status_code=401)
        return Verified(event_id, timestamp)


class DocExtractVerifier:
    """DocExtract: HMAC-SHA256 of the raw body; the body's sha256 is the message id."""

    scheme: ClassVar[str] = "docextract"
    SIGNATURE = "x-docextract-signature"

    def __init__(
        self, secrets: Sequence[Secret], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._keys = HmacKeys(secrets)

    def __repr__(self) -> str:
        return f"DocExtractVerifier(secrets={len(self._keys)})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """The body's sha256 as message id when ``body`` verifies; VerificationError otherwise."""
        header = headers.get(self.SIGNATURE) or ""
        if not header:
            raise _missing([self.SIGNATURE])
        signature = read_hex_signature(header)
        require_utf8(body)
        if not self._keys.match(body, signature):
            raise VerificationError("bad_signature", "no matching signature", status_code=401)
        return Verified(hashlib.sha256(body).hexdigest())
