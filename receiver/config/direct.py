"""The rules of a source taking Reducto's direct (unsigned) webhooks as hints."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.secret import Secret

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{32,256}$")
HOW_TO_MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def check_direct(
    provider: str, api_base_url: str | None, api_key: Secret | None, tokens: Sequence[Secret]
) -> None:
    """ValueError unless the source is Reducto's, has a job API to ask, and unguessable tokens.

    32 URL-safe characters hold at least 128 bits when random (hex: 4 bits each, base64url: 6).
    """
    if provider != "reducto":
        raise ValueError(f"webhook_mode 'direct' is for provider 'reducto', not {provider!r}")
    if not (api_base_url and api_key):
        raise ValueError("webhook_mode 'direct' needs api_base_url and api_key: hints are checked")
    if not tokens:
        raise ValueError("webhook_mode 'direct' needs at least one direct_tokens entry")
    for index, token in enumerate(tokens, start=1):
        if not _TOKEN.match(token.reveal()):
            raise ValueError(
                f"direct_tokens #{index}: use 32 to 256 URL-safe characters (A-Z a-z 0-9 _ -) "
                f"with at least 128 random bits: {HOW_TO_MAKE_ONE}"
            )
