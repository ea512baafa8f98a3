"""The signature schemes a source may use: Svix (the default) and the providers' own HMACs
(DocuRift's and DocExtract's in ``hmac``, LlamaCloud's ``LC-Signature`` in ``llamacloud``) and
Amazon SNS's RSA signatures (``sns``, built from a source's topics).

Each scheme names itself (its class's ``scheme``); ``build_verifier`` makes the verifier of one.
Which provider accepts which scheme is the provider's declaration
(``Provider.signature_schemes``), and a provider may bring schemes of its own
(``Provider.verifiers``), which ``build_verifier`` is handed. The contract is in ``base``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from receiver.signatures.hmac import DocExtractVerifier, DocuRiftVerifier, check_hmac_secret
from receiver.signatures.llamacloud import LlamaCloudVerifier
from receiver.signatures.sns import SnsVerifier
from receiver.signatures.svix import SvixVerifier

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from receiver.secret import Secret
    from receiver.signatures.base import Verifier

__all__ = [
    "SCHEMES",
    "DocExtractVerifier",
    "DocuRiftVerifier",
    "LlamaCloudVerifier",
    "SecretScheme",
    "SvixVerifier",
    "build_verifier",
    "check_hmac_secret",
]


class SecretScheme(Protocol):
    """A scheme that verifies with a source's secrets (a verifier class, or a provider's own):
    called with them, it makes the source's verifier."""

    def __call__(self, secrets: Sequence[Secret], *, clock: Callable[[], float]) -> Verifier: ...


SCHEMES: dict[str, SecretScheme | None] = {
    SvixVerifier.scheme: SvixVerifier,
    DocuRiftVerifier.scheme: DocuRiftVerifier,
    DocExtractVerifier.scheme: DocExtractVerifier,
    LlamaCloudVerifier.scheme: LlamaCloudVerifier,
    SnsVerifier.scheme: None,  # built from its source's topics, not from secrets
}
"""The built-in schemes by name."""


def known_schemes(own: Mapping[str, object] | None = None) -> list[str]:
    """The built-in schemes' names, then those of ``own`` (a provider's own schemes)."""
    return [*SCHEMES, *(name for name in own or {} if name not in SCHEMES)]


def build_verifier(
    scheme: str,
    secrets: Sequence[Secret],
    *,
    public_keys: Sequence[str] = (),
    clock: Callable[[], float] = time.time,
    own: Mapping[str, SecretScheme] | None = None,
) -> Verifier:
    """The verifier of ``scheme`` holding ``secrets`` (and, for svix, ed25519 ``public_keys``);
    ``own`` holds the schemes the source's provider brings itself.

    ValueError for an unknown scheme, or public keys for a scheme that has none.
    """
    if scheme == SvixVerifier.scheme:
        return SvixVerifier(secrets, public_keys=public_keys, clock=clock)
    if public_keys:
        raise ValueError(f"signature {scheme!r} has no public keys; only svix (v1a) does")
    if scheme in SCHEMES:
        made = SCHEMES[scheme]
        if made is None:
            raise ValueError(f"signature {scheme!r} is built from its source's settings")
        return made(secrets, clock=clock)
    if own and scheme in own:
        return own[scheme](secrets, clock=clock)
    raise ValueError(f"unknown signature scheme {scheme!r}")
