"""A provider's job API, spoken within its rate budget, with its failures translated once."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import httpx
import structlog

from receiver import jsontext
from receiver.backoff import capped, retry_after
from receiver.errors import ProviderError

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.models import ResultRef
    from receiver.providers.base import JobStatus, ListedJob, Provider, Submission
    from receiver.providers.ratelimit import RateLimiter
    from receiver.secret import Secret

log = structlog.get_logger(__name__)


class JobNotFoundError(ProviderError):
    """The provider does not know the job (never existed, or purged): asking again won't help."""


class SubmissionUnknownError(ProviderError):
    """A submission timed out: the provider may or may not have created the job."""


class SubmissionRejectedError(ProviderError):
    """The provider refused a submission (a 4xx other than 429): sending it again won't help."""


class JobAPI:
    """``GET`` a job (or a page of the job list) for one source."""

    def __init__(
        self,
        *,
        source: str,
        provider: Provider,
        base_url: str,
        api_key: Secret,
        client: httpx.AsyncClient,
        limiter: RateLimiter,
    ) -> None:
        self.source = source
        self.provider = provider
        self._base = base_url.rstrip("/")
        self._api_key = api_key
        self._client = client
        self.limiter = limiter
        self.calls: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"JobAPI(source={self.source!r}, base_url={self._base!r})"

    def use_key(self, api_key: Secret) -> None:
        """A rotated API key: every request from now on sends it."""
        self._api_key = api_key

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        """The job's current status and result reference; ProviderError when it can't be had.

        ``urgent`` (confirming a completion) goes before routine polls in the rate budget.
        """
        body = await self._get(self.provider.job_path(job_id), job_id=job_id, urgent=urgent)
        status = self.provider.parse_job(body, source=self.source, job_id=job_id)
        ref = status.result
        if ref is not None and ref.url is not None and ref.url.startswith("/"):
            # A result the job API serves itself (Docling Serve's /v1/result/{id}).
            status = replace(status, result=replace(ref, url=self._base + ref.url))
        return status

    def result_headers(self, url: str) -> dict[str, str]:
        """The API key's header for a result URL that takes it (``Provider.result_takes_key``:
        under this job API's base URL and not presigned); none for any other URL."""
        if self.provider.result_takes_key(url, self._base):
            return self.provider.auth_headers(self._api_key.reveal())
        return {}

    async def job_body(self, job_id: str) -> Any:
        """The job endpoint's JSON answer as it came (what a resubmission is built from)."""
        return await self._get(self.provider.job_path(job_id), job_id=job_id)

    async def list_jobs(
        self, *, cursor: str | None = None, status: str | None = None
    ) -> tuple[list[ListedJob], str | None] | None:
        """One page of the provider's job list, or None when it has no list endpoint."""
        path = self.provider.list_path(cursor=cursor, status=status)
        if path is None:
            return None
        return self.provider.parse_list(await self._get(path, job_id=None))

    async def submit(self, submission: Submission) -> str:
        """Create a job (``POST``), within the same rate budget; its id at the provider.

        ProviderError (with ``retry_after`` for 429/5xx) when it may work later, and
        SubmissionRejectedError when the provider refused the body.
        """
        body = await self._get(submission.path, job_id=None, json_body=submission.body)
        return self.provider.submitted_job_id(body)

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """Assemble a result of several calls (``ref.assemble``) into ``dest``, atomically: its
        sha256 and size. Only a provider whose ``job_api_class`` assembles results has one."""
        raise ProviderError(f"{self.source}: {self.provider.name} assembles no results")

    async def _get(
        self,
        path: str,
        *,
        job_id: str | None,
        urgent: bool = False,
        json_body: dict[str, Any] | None = None,
    ) -> Any:
        headers = self.provider.auth_headers(self._api_key.reveal())
        if json_body is None:
            response = await self._send(
                "GET", self._base + path, job_id=job_id, urgent=urgent, headers=headers
            )
        else:
            content = json.dumps(
                json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode()
            headers["Content-Type"] = "application/json"
            response = await self._send(
                "POST", self._base + path, job_id=job_id, urgent=urgent, headers=headers,
                content=content, submission=True,
            )  # fmt: skip
        body = _json(response)
        if body is None:
            raise ProviderError(f"{self.source}: job API answered invalid JSON")
        return body

    async def _send(
        self,
        method: str,
        url: str,
        *,
        job_id: str | None,
        urgent: bool = False,
        headers: dict[str, str],
        content: bytes | None = None,
        submission: bool = False,
    ) -> httpx.Response:
        """One request within the rate budget; its 2xx answer, else the error it means.

        429 and 5xx are ProviderError with the server's wait (a 429 also defers the budget);
        404 about a job is JobNotFoundError; other 4xx SubmissionRejectedError for a
        ``submission``, ProviderError otherwise. Subclasses sign ``headers`` and ``content``
        before calling it, and read what they need of the answer (headers, body) after.
        """
        await self.limiter.acquire(urgent=urgent)
        try:
            response = await self._client.request(method, url, headers=headers, content=content)
        except httpx.TimeoutException as exc:
            self._count("timeout")
            if submission:
                raise SubmissionUnknownError(f"{self.source}: submission timed out") from exc
            raise ProviderError(f"{self.source}: job API timed out") from exc
        except httpx.TransportError as exc:
            self._count("error")
            raise ProviderError(
                f"{self.source}: job API unreachable: {type(exc).__name__}"
            ) from exc
        self._count(str(response.status_code))
        self.limiter.observe(response.headers)
        if response.status_code == 429 or response.status_code >= 500:
            wait = retry_after(response.headers)
            if wait is None:  # a body can say Infinity too (JSON as Python reads it)
                wait = capped(self.provider.retry_hint(_json(response)))
            if response.status_code == 429:
                self.limiter.defer(wait if wait is not None else self.limiter.interval * 2)
            raise ProviderError(
                f"{self.source}: job API answered {response.status_code}", retry_after=wait
            )
        if response.status_code == 404 and job_id is not None:
            raise JobNotFoundError(f"{self.source}: job {job_id!r} not found")
        if submission and response.status_code >= 400:
            raise SubmissionRejectedError(
                f"{self.source}: submission refused with {response.status_code}"
            )
        if response.status_code >= 400:
            raise ProviderError(f"{self.source}: job API answered {response.status_code}")
        return response

    def _count(self, outcome: str) -> None:
        self.calls[outcome] = self.calls.get(outcome, 0) + 1


def _json(response: httpx.Response) -> Any:
    try:
        return jsontext.loads(response.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
