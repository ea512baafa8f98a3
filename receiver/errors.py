"""The errors jobhook raises, grouped by what the caller does with them.

    JobhookError
     ├── ConfigError                 fatal at startup: fix the configuration
     │    ├── HandlerLoadError       a configured handler cannot be imported or built
     │    └── ProviderLoadError      a source's provider cannot be found or is no Provider
     ├── RejectedError               the request is refused with a 4xx and nothing is stored
     │    ├── VerificationError      the webhook's signature or headers did not verify (400/401)
     │    ├── PayloadError           the verified body is not what the provider sends (400)
     │    ├── UnknownSourceError     no source of that name is configured (404)
     │    └── BodyTooLargeError      the body exceeds ``server.max_body_bytes`` (413)
     └── RetryableError              transient: answer 503 / try again later
          ├── StoreUnavailableError  the store could not commit
          ├── ProviderError          the provider's job API failed or refused
          ├── DeliveryError          a handler's destination failed in a known way (``code``)
          └── FetchError             a result could not be downloaded
               ├── UnsafeURLError    a result URL is not allowed: never retried
               ├── ResultTooLargeError  the result exceeds ``results.max_bytes``: never retried
               ├── ResultDiskFullError  ``results.dir`` has no space left: retried until it has
               ├── ResultConsumedError  a single-use result was requested before: never again
               └── ChecksumError     the result's sha256 is not the one the provider gave

Third-party errors are translated once, where they enter (``raise ... from exc``).
"""

from __future__ import annotations


class JobhookError(Exception):
    """Base of every error jobhook raises on purpose."""


class ConfigError(JobhookError):
    """The configuration is missing, malformed or unsafe; the process must not start."""


class HandlerLoadError(ConfigError):
    """A configured handler could not be imported or constructed."""


class ProviderLoadError(ConfigError):
    """A source's ``provider`` names no built-in, entry point or importable Provider subclass."""


class RejectedError(JobhookError):
    """A request that is refused with a 4xx; ``reason`` is a stable machine-readable word."""

    status_code = 400

    def __init__(self, reason: str, detail: str = "", *, status_code: int | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        if status_code is not None:
            self.status_code = status_code


class VerificationError(RejectedError):
    """The webhook did not verify: malformed input is 400, a wrong or stale signature 401."""


class PayloadError(RejectedError):
    """The body verified but does not have the shape the provider sends."""


class UnknownSourceError(RejectedError):
    """No source of that name is configured."""

    status_code = 404


class BodyTooLargeError(RejectedError):
    """The request body is larger than ``server.max_body_bytes``."""

    status_code = 413


class RetryableError(JobhookError):
    """A transient failure: the work is retried later (HTTP callers get 503)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreUnavailableError(RetryableError):
    """The store could not read or commit; nothing was acknowledged."""


class ProviderError(RetryableError):
    """The provider's job API failed, timed out or rate-limited us."""


class FetchError(RetryableError):
    """A result download failed; ``expired`` says the URL must be refreshed first."""

    permanent = False
    """True when retrying the same URL cannot help (unsafe URL, result too large)."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, expired: bool = False
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.expired = expired


class UnsafeURLError(FetchError):
    """A result URL points to a host or address that is not allowed; it is never requested."""

    permanent = True


class ResultTooLargeError(FetchError):
    """The result is larger than ``results.max_bytes``; the download is abandoned for good."""

    permanent = True


class ResultDiskFullError(FetchError):
    """``results.dir`` ran out of space (or quota) while writing a result: the partial file is
    removed and the completion is resolved again later, however long the disk stays full."""


class ResultConsumedError(FetchError):
    """A single-use result's one request was made before (a failed or interrupted download):
    asking again would be refused or, worse, served to nobody; the completion fails."""

    permanent = True


class ChecksumError(FetchError):
    """The downloaded result's sha256 differs from the checksum the provider published."""


class DeliveryError(RetryableError):
    """A handler's delivery failed for a known reason; ``code`` names it (``http_5xx``,
    ``connect_error``...) and ``summary`` says it without the destination's answer body."""

    def __init__(
        self, message: str, *, code: str, summary: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.code = code
        self.summary = summary
