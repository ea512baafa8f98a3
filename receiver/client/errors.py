"""The errors the client raises, grouped by what pipeline code does with them.

    JobhookError
     ├── ApiError(status, code, message)   the admin API answered with an error
     │    ├── BadRequest           400, 413, 422: the request is refused as it stands; fix it
     │    ├── Unauthorized         401: no admin token, or not one of the service's
     │    ├── Forbidden            403: the token's role may not do this (``needs`` names the role)
     │    ├── NotFound             404: no such job or source (or no admin API at that URL)
     │    └── ServiceUnavailable   5xx: the service cannot answer now; try again later
     ├── TransportError            the service could not be reached, or the connection broke
     ├── ProtocolError             the answer is not one the admin API gives (wrong URL?)
     └── WaitTimeout               ``wait`` gave up: the job was not terminal in time

``code`` is the API's machine-readable word (``unknown_job``, ``invalid_query``...), ``message``
its sentence. httpx's errors are translated once, in the client, with ``raise ... from exc``.
No error carries the admin token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from receiver.client.models import JobDetail


class JobhookError(Exception):
    """Base of every error the jobhook client raises."""


class ApiError(JobhookError):
    """The admin API answered ``status`` with its error ``code`` and ``message``."""

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{message} ({status}{' ' + code if code else ''})")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class BadRequest(ApiError):
    """The request was refused as it stands (400, 413, 422): sending it again will not help."""


class Unauthorized(ApiError):
    """401: no admin token was given, or it is not one of the service's tokens."""


class Forbidden(ApiError):
    """403: the token is known but its role may not do this; ``needs`` is the role it takes
    (``read``, ``track``, ``operate`` or ``admin``)."""

    def __init__(self, status: int, code: str, message: str, *, needs: str = "") -> None:
        super().__init__(status, code, message)
        self.needs = needs


class NotFound(ApiError):
    """404: no such job or source, or no admin API at that URL (``code`` is then empty)."""


class ServiceUnavailable(ApiError):
    """A 5xx: the service (or the provider behind it) cannot answer now; ``retry_after`` hints
    when to try again."""


class TransportError(JobhookError):
    """The service at ``url`` could not be reached or the connection broke; ``reason`` names
    the underlying error (``ConnectError``, ``ReadTimeout``...)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach {url} ({reason})")
        self.url = url
        self.reason = reason


class ProtocolError(JobhookError):
    """The answer is not what the admin API sends: wrong URL, or a proxy in the way."""


class WaitTimeout(JobhookError):
    """``wait`` ran out of time; ``last`` is the job as last seen (None if never seen)."""

    def __init__(self, source: str, job_id: str, seconds: float, last: JobDetail | None) -> None:
        state = last.job.state if last is not None else "not seen"
        super().__init__(f"job {source}/{job_id} not terminal after {seconds:g} s ({state})")
        self.source = source
        self.job_id = job_id
        self.last = last
