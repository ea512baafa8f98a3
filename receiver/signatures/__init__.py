"""The signature schemes a source may use: Svix (the default) and the providers' own HMACs
(DocuRift's and DocExtract's in ``hmac``, LlamaCloud's ``LC-Signature`` in ``llamacloud``) and
Amazon SNS's RSA signatures (``sns``, built from a source's topics).

``build_verifier`` makes the verifier of a scheme; ``check_scheme`` says whether a provider may
use it. The contract is in ``base``, Svix in ``svix``, the providers' HMACs in ``hmac``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from receiver.signatures.hmac import DocExtractVerifier, DocuRiftVerifier, check_hmac_secret
from receiver.signatures.llamacloud import LlamaCloudVerifier
from receiver.signatures.svix import SvixVerifier

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from receiver.secret import Secret
    from receiver.signatures.base import Verifier

__all__ = [
    "SCHEMES",
    "DocExtractVerifier",
    "DocuRiftVerifier",
    "LlamaCloudVerifier",
    "SvixVerifier",
    "build_verifier",
    "check_hmac_secret",
    "check_scheme",
]

SCHEMES = ("svix", "docurift", "docextract", "sns", "llamacloud")
# Which providers may use a provider-specific scheme; svix is open to every provider.
_PROVIDERS_OF = {
    "docurift": ("docurift", "generic"),
    "docextract": ("docextract", "generic"),
    "sns": ("textract",),
    "llamacloud": ("llamaparse", "generic"),
}


def check_scheme(scheme: str, provider: str | None) -> None:
    """ValueError unless ``scheme`` exists and may sign webhooks of ``provider`` (when known)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown signature scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    allowed = _PROVIDERS_OF.get(scheme)
    if allowed is not None and provider is not None and provider not in allowed:
        raise ValueError(
            f"signature {scheme!r} is only for provider {' or '.join(allowed)}, not {provider!r}"
        )


def build_verifier(
    scheme: str,
    secrets: Sequence[Secret],
    *,
    public_keys: Sequence[str] = (),
    clock: Callable[[], float] = time.time,
) -> Verifier:
    """The verifier of ``scheme`` holding ``secrets`` (and, for svix, ed25519 ``public_keys``).

    ValueError for an unknown scheme, or public keys for a scheme that has none.
    """
    if scheme == "svix":
        return SvixVerifier(secrets, public_keys=public_keys, clock=clock)
    if public_keys:
        raise ValueError(f"signature {scheme!r} has no public keys; only svix (v1a) does")
    if scheme == "docurift":
        return DocuRiftVerifier(secrets, clock=clock)
    if scheme == "docextract":
        return DocExtractVerifier(secrets)
    if scheme == "sns":
        raise ValueError("signature 'sns' is built from its source's topics: SnsVerifier")
    if scheme == "llamacloud":
        return LlamaCloudVerifier(secrets)
    raise ValueError(f"unknown signature scheme {scheme!r}")
