"""jobhook's client for pipeline code: track a job, wait for it, react to completions.

    from receiver.client import Client

    with Client() as jobhook:          # JOBHOOK_URL, JOBHOOK_ADMIN_TOKEN (a track token will do)
        jobhook.track("reducto", job_id, metadata={"batch": "42"})
        detail = jobhook.wait("reducto", job_id, timeout=600)

``AsyncClient`` has the same methods, awaited. This package imports nothing of the service.
"""

from __future__ import annotations

from receiver.client.aio import AsyncClient
from receiver.client.core import Filters
from receiver.client.errors import (
    ApiError,
    BadRequest,
    Forbidden,
    JobhookError,
    NotFound,
    ProtocolError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
    WaitTimeout,
)
from receiver.client.models import (
    AuditEntry,
    Completion,
    Delivery,
    Dispatch,
    Failure,
    Job,
    JobDetail,
    Page,
    Progress,
    ReprocessOutcome,
    Resolution,
    ResultInfo,
    State,
    Stats,
)
from receiver.client.sync import Client

__all__ = [
    "ApiError",
    "AsyncClient",
    "AuditEntry",
    "BadRequest",
    "Client",
    "Completion",
    "Delivery",
    "Dispatch",
    "Failure",
    "Filters",
    "Forbidden",
    "Job",
    "JobDetail",
    "JobhookError",
    "NotFound",
    "Page",
    "Progress",
    "ProtocolError",
    "ReprocessOutcome",
    "Resolution",
    "ResultInfo",
    "ServiceUnavailable",
    "State",
    "Stats",
    "TransportError",
    "Unauthorized",
    "WaitTimeout",
]
