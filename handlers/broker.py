"""What the queue handlers (redis, nats, rabbitmq) share: broker URLs, secrets, error text.

Broker URLs may carry credentials, so nothing here echoes one: option errors name the option,
display forms drop the userinfo and query, and error text has the passwords blanked out.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable
    from urllib.parse import SplitResult

    from receiver.secret import Secret


def require_extra(module: str, handler: str, package: str) -> None:
    """Raise ImportError naming ``package`` and the install command when ``module`` is missing."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the {handler} handler needs the {package!r} package: "
            f"install jobhook[{handler}] (uv sync --extra {handler})"
        ) from exc


def parse_url(url: str, invalid: str, default_scheme: str | None = None) -> SplitResult:
    """``url`` split into parts; ValueError(``invalid``) when it or its port is malformed."""
    if default_scheme is not None and "://" not in url:
        url = f"{default_scheme}://{url}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(invalid) from None
    return parts


def describe(exc: BaseException, timeout: float, urls: Iterable[Secret]) -> str:
    """``exc`` as one line for errors and logs, with the passwords of ``urls`` blanked out."""
    if str(exc):
        text = f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, TimeoutError):
        text = f"TimeoutError: no answer within {timeout}s"
    else:
        text = type(exc).__name__
    for url in urls:
        # Client libraries may echo the URL (or its percent-decoded password) in their errors.
        password = urlsplit(url.reveal()).password
        if password:
            text = text.replace(password, "***").replace(unquote(password), "***")
    return text
