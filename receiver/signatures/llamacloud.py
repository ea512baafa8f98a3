"""LlamaCloud's webhook signature (LlamaParse, LlamaExtract... with a ``webhook_signing_secret``).

``LC-Signature: sha256=<hex>``: the HMAC-SHA256 of the raw body, keyed with the secret as UTF-8
text (``llama-cloud`` 2.19.0's ``WebhookConfiguration.webhook_signing_secret``). No timestamp
and no event id are signed, so the message id is the body's sha256 and a replayed delivery is
a duplicate. Without a signing secret LlamaCloud signs nothing: such a source takes its
deliveries as hints (``webhook_mode = "direct"``) instead.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, ClassVar

from receiver.errors import VerificationError
from receiver.signatures.base import Verified, require_utf8
from receiver.signatures.hmac import HmacKeys, read_hex_signature

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from receiver.secret import Secret


class LlamaCloudVerifier:
    """``LC-Signature``: HMAC-SHA256 of the raw body; the body's sha256 is the message id."""

    scheme: ClassVar[str] = "llamacloud"
    SIGNATURE = "lc-signature"

    def __init__(
        self, secrets: Sequence[Secret], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._keys = HmacKeys(secrets)

    def __repr__(self) -> str:
        return f"LlamaCloudVerifier(secrets={len(self._keys)})"

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Verified:
        """The body's sha256 as message id when ``body`` verifies; VerificationError otherwise."""
        header = headers.get(self.SIGNATURE) or ""
        if not header:
            raise VerificationError("missing_headers", f"missing header(s): {self.SIGNATURE}")
        signature = read_hex_signature(header)
        require_utf8(body)
        if not self._keys.match(body, signature):
            raise VerificationError("bad_signature", "no matching signature", status_code=401)
        return Verified(hashlib.sha256(body).hexdigest())
