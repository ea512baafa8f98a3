"""Normalised errors: a code for what failed, a short message safe to show, and where it arose.

A code is the provider's own where it sends one (``DOCUMENT_CORRUPT``), else jobhook's:

    provider   provider_failed, provider_cancelled, provider_expired (the state, no code given),
               job_not_found, confirm_timeout (the job API never confirmed in time)
    fetch      result_expired, result_consumed, result_too_large, checksum_mismatch, unsafe_url,
               fetch_failed, disk_full (retried, never final), no_fetcher, resolve_failed
    handler    http_5xx, http_4xx, http_3xx, connect_error, http_error, timeout,
               handler_exception, handler_missing

A message is at most ``MAX_MESSAGE`` characters, URLs lose their query and credentials, and no
answer body is ever part of it (a DeliveryError's ``summary`` leaves it out).
"""

from __future__ import annotations

import re

from receiver.errors import (
    ChecksumError,
    DeliveryError,
    FetchError,
    ProviderError,
    ResultConsumedError,
    ResultDiskFullError,
    ResultTooLargeError,
    UnsafeURLError,
)

MAX_MESSAGE = 300
_URL = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^/\s@]*@)?(?P<rest>[^\s?#'\"]*)"
                  r"(?:[?#][^\s'\"]*)?")  # fmt: skip


def bounded(text: str | None) -> str | None:
    """``text`` on one line, URLs without query or credentials, cut to MAX_MESSAGE characters."""
    if text is None:
        return None
    flat = " ".join(_URL.sub(r"\g<scheme>\g<rest>", text).split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 1] + "…"


def handler_failure(exc: BaseException) -> tuple[str, str]:
    """The code and message of a handler's failed attempt."""
    if isinstance(exc, DeliveryError):
        return exc.code, bounded(exc.summary) or exc.code
    if isinstance(exc, TimeoutError):
        return "timeout", f"{type(exc).__name__}: timed out"
    return "handler_exception", bounded(f"{type(exc).__name__}: {exc}") or "handler_exception"


def fetch_code(exc: FetchError) -> str:
    """jobhook's code for a download that failed."""
    if isinstance(exc, UnsafeURLError):
        return "unsafe_url"
    if isinstance(exc, ResultConsumedError):
        return "result_consumed"
    if isinstance(exc, ResultTooLargeError):
        return "result_too_large"
    if isinstance(exc, ChecksumError):
        return "checksum_mismatch"
    if isinstance(exc, ResultDiskFullError):
        return "disk_full"
    return "result_expired" if exc.expired else "fetch_failed"


def resolve_failure(exc: BaseException) -> tuple[str, str]:
    """The code and where of a completion whose resolution was given up after its retries."""
    if isinstance(exc, ProviderError):
        return "confirm_timeout", "provider"
    if isinstance(exc, FetchError):
        return fetch_code(exc), "fetch"
    return "resolve_failed", "fetch"


def http_code(status: int) -> str:
    """``http_5xx`` for 503: the class of an HTTP status."""
    return f"http_{status // 100}xx"
