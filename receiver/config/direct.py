"""The rules of a source taking unsigned callbacks (Reducto's direct webhooks, Docling Serve's
and LlamaParse's callbacks) as hints."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from receiver.secret import Secret

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{32,256}$")
_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
HOW_TO_MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
TAKEN_HEADERS = frozenset({"authorization", "content-type", "content-length", "host", "cookie"})


def check_direct(
    provider: str,
    api_base_url: str | None,
    api_key: Secret | None,
    tokens: Sequence[Secret],
    *,
    hint_providers: Sequence[str],
    header: str | None = None,
    header_values: Sequence[Secret] = (),
) -> None:
    """ValueError unless the provider sends unsigned callbacks, has a job API to ask, and the
    source has unguessable path tokens or header values (or both).

    32 URL-safe characters hold at least 128 bits when random (hex: 4 bits each, base64url: 6).
    """
    if provider not in hint_providers:
        names = ", ".join(repr(name) for name in hint_providers)
        raise ValueError(f"webhook_mode 'direct' is for provider {names}, not {provider!r}")
    if not (api_base_url and api_key):
        raise ValueError("webhook_mode 'direct' needs api_base_url and api_key: hints are checked")
    if header_values and header is None:
        raise ValueError("direct_header_values need direct_header (the header that carries them)")
    if not tokens and not header:
        raise ValueError(
            "webhook_mode 'direct' needs at least one direct_tokens entry "
            "(or direct_header with direct_header_values)"
        )
    _strong("direct_tokens", tokens)
    if header is not None:
        if not _HEADER.match(header) or header.lower() in TAKEN_HEADERS:
            raise ValueError(  # the value is not echoed: it may be anything
                "direct_header: use a header name of your own, like X-Jobhook-Token (not "
                "Authorization, Cookie, Host or a content header)"
            )
        if not header_values:
            raise ValueError("direct_header needs at least one direct_header_values entry")
        _strong("direct_header_values", header_values)


def _strong(key: str, values: Sequence[Secret]) -> None:
    for index, value in enumerate(values, start=1):
        if not _TOKEN.match(value.reveal()):
            raise ValueError(
                f"{key} #{index}: use 32 to 256 URL-safe characters (A-Z a-z 0-9 _ -) "
                f"with at least 128 random bits: {HOW_TO_MAKE_ONE}"
            )
