"""Google Document AI: ``batchProcess`` starts a long-running operation; its results are JSON
``Document`` shards in a Cloud Storage bucket.

``GET /v1/projects/{p}/locations/{l}/operations/{id}`` (``operations.get``) reports ``done`` and
``BatchProcessMetadata.state`` (``WAITING``, ``RUNNING``, ``SUCCEEDED``, ``FAILED``,
``CANCELLING``, ``CANCELLED``) with each input's ``status`` and ``outputGcsDestination``. Calls
carry an OAuth2 bearer token that google-auth makes from a service-account key (or the
environment's default credentials). What ``google-cloud-documentai`` 3.16.0 speaks over REST is
the spec.

A job's id is ``{project}:{location}:{operationId}`` (the name without its fixed words: one path
segment of ``/jobs/{source}/{job_id}``). The result is assembled by ``write_result``: every shard
listed under each document's output prefix (the GCS JSON API), streamed into one JSON file with
its md5 checked against the listing.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
from typing import TYPE_CHECKING, Annotated, Any, cast
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from receiver import jsontext
from receiver.backoff import retry_after
from receiver.errors import (
    ChecksumError,
    ConfigError,
    PayloadError,
    ProviderError,
    ResultTooLargeError,
)
from receiver.files import atomic_open
from receiver.models import State
from receiver.providers.base import JobStatus, Provider, ResultRef
from receiver.providers.google_fields import document_entities
from receiver.providers.jobapi import JobAPI, JobNotFoundError
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from google.auth.credentials import Credentials
    from pydantic import ValidationInfo

    from receiver.models import Event, Via

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_NAME = re.compile(r"^projects/([^/]+)/locations/([^/]+)/operations/([^/]+)$")
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_GS = re.compile(r"^gs://([a-z0-9][a-z0-9._-]{1,220})/(.*)$")
RPC_CODES = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED",
    13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}  # fmt: skip
"""google.rpc.Code: a Status's ``code`` as the word errors are known by."""
TOKEN_EARLY = 300.0
"""A token is refreshed this many seconds before it expires."""


def _secret(value: object, info: ValidationInfo) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string: 'file:PATH' of the key, 'env:NAME' or the JSON")
    env = info.context.get("env") if isinstance(info.context, dict) else None
    return Secret(resolve_secret(value, env))


OptionalSecret = Annotated[Secret | None, BeforeValidator(_secret)]


class GcpOptions(BaseModel):
    """``[sources.NAME.gcp]``: the service account, the location, where Cloud Storage is."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    credentials: OptionalSecret = None
    """The service-account key (its JSON: ``file:/etc/jobhook/docai.json``); unset, the
    environment's default credentials (``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server)."""
    project: str | None = None
    """The project of bare operation ids."""
    location: str = "us"
    """The processors' location: the job API is ``https://{location}-documentai.googleapis.com``
    unless ``api_base_url`` says otherwise."""
    storage_url: str = "https://storage.googleapis.com"
    """The Cloud Storage JSON API the output shards are read from."""
    max_result_bytes: int = Field(2 * 1024**3, gt=0)
    """The assembled result's cap: past it the assembly stops (as ``results.max_bytes``)."""

    @field_validator("credentials")
    @classmethod
    def _key(cls, value: Secret | None) -> Secret | None:
        if value is None:
            return None
        try:
            key = json.loads(value.reveal())
        except ValueError:
            raise ValueError("is not a service-account key (JSON)") from None
        if not isinstance(key, dict) or key.get("type") != "service_account":
            raise ValueError("is not a service-account key: its type must be service_account")
        missing = [k for k in ("client_email", "private_key", "token_uri") if not key.get(k)]
        if missing:
            raise ValueError(f"the service-account key has no {', '.join(missing)}")
        return value

    @field_validator("project", "location")
    @classmethod
    def _part(cls, value: str | None) -> str | None:
        if value is not None and not _PART.match(value):
            raise ValueError("must be letters, digits, '.', '_' or '-'")
        return value

    @field_validator("storage_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/")


class GoogleJobAPI(JobAPI):
    """``operations.get`` with a bearer token from google-auth, and the shards from Cloud Storage.

    google-auth signs the token request (a JWT from the key) and parses the answer; its refresh
    is blocking, so it runs in a thread, and sends its requests through ``_LoopRequest``: on
    the job API's own client, so the token endpoint is reached through ``[egress]`` (proxy, CA)
    like every other call, and without ``google.auth.transport.requests`` (jobhook does not
    depend on requests).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        provider = self.provider
        assert isinstance(provider, GoogleDocAI)
        self.options = provider.options
        self._credentials: Credentials | None = None
        self._refreshing = asyncio.Lock()

    async def _bearer(self) -> dict[str, str]:
        async with self._refreshing:
            creds = self._credentials
            if creds is None:
                creds = self._credentials = _load_credentials(self.options)
            expiry = getattr(creds, "expiry", None)
            soon = expiry is not None and expiry.timestamp() - time.time() < TOKEN_EARLY
            if not creds.token or soon:
                try:
                    request = cast("Any", _LoopRequest(self._client))
                    await anyio.to_thread.run_sync(creds.refresh, request)
                except Exception as exc:  # google.auth.exceptions.* and transport failures
                    raise ProviderError(
                        f"{self.source}: no access token: {type(exc).__name__}"
                    ) from exc
            return {"Authorization": f"Bearer {creds.token}"}

    async def get_job(self, job_id: str, *, urgent: bool = False) -> JobStatus:
        body = await self._json("GET", self._base + self.provider.job_path(job_id), job_id=job_id,
                                urgent=urgent)  # fmt: skip
        return self.provider.parse_job(body, source=self.source, job_id=job_id)

    async def job_body(self, job_id: str) -> Any:
        return await self._json("GET", self._base + self.provider.job_path(job_id), job_id=job_id)

    async def _json(
        self, method: str, url: str, *, job_id: str | None, urgent: bool = False
    ) -> Any:
        headers = await self._bearer()
        try:
            response = await self._send(method, url, job_id=job_id, urgent=urgent, headers=headers)
        except JobNotFoundError as exc:
            raise JobNotFoundError(
                f"{self.source}: operation {job_id!r} not found (gone, or never in this project)"
            ) from exc
        try:
            return jsontext.loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ProviderError(f"{self.source}: answered invalid JSON") from exc

    async def write_result(self, job_id: str, ref: ResultRef, dest: Path) -> tuple[str, int]:
        """Every document's shards, listed under its output prefix, into one JSON file; each
        shard streamed in (never whole in memory), its md5 checked against the listing."""
        documents = ref.inline if isinstance(ref.inline, list) else []
        digest, size = hashlib.sha256(), 0
        with atomic_open(dest) as out:

            def write(data: bytes) -> None:
                nonlocal size
                size += len(data)
                if size > self.options.max_result_bytes:
                    raise ResultTooLargeError(
                        f"{self.source}: the shards exceed {self.options.max_result_bytes} bytes"
                    )
                digest.update(data)
                out.write(data)

            write(b'{"operation":' + json.dumps(job_id).encode() + b',"documents":[')
            for index, document in enumerate(documents):
                write(b"," if index else b"")
                head = {k: document.get(k) for k in ("input", "output", "status")}
                write(json.dumps(head)[:-1].encode() + b',"shards":[')
                output = document.get("output")
                if isinstance(output, str) and output and document.get("ok"):
                    for n, (name, md5, length) in enumerate(await self._listing(job_id, output)):
                        shard = {"object": name, "md5": md5, "bytes": length}
                        write((b"," if n else b"") + json.dumps(shard)[:-1].encode())
                        write(b',"document":')
                        await self._stream(job_id, output, name, md5, write)
                        write(b"}")
                write(b"]}")
            write(b"]}")
        return digest.hexdigest(), size

    async def _listing(self, job_id: str, output: str) -> list[tuple[str, str | None, int | None]]:
        """The JSON objects under ``output`` (``gs://bucket/prefix``): (name, md5, size)."""
        bucket, prefix = _gs(output)
        found: list[tuple[str, str | None, int | None]] = []
        token: str | None = None
        for _ in range(1000):
            query = f"prefix={quote(prefix.rstrip('/') + '/', safe='')}"
            if token:
                query += f"&pageToken={quote(token, safe='')}"
            url = f"{self.options.storage_url}/storage/v1/b/{quote(bucket, safe='')}/o?{query}"
            page = await self._json("GET", url, job_id=job_id, urgent=True)
            items = page.get("items", []) if isinstance(page, dict) else None
            if not isinstance(items, list):
                raise ProviderError(f"{self.source}: the bucket listing has no items")
            for item in items:
                name = item.get("name") if isinstance(item, dict) else None
                if isinstance(name, str) and name.endswith(".json"):
                    md5, length = item.get("md5Hash"), str(item.get("size", ""))
                    found.append((name, md5 if isinstance(md5, str) else None,
                                  int(length) if length.isdigit() else None))  # fmt: skip
            token = page.get("nextPageToken")
            if not isinstance(token, str) or not token:
                break
        return sorted(found)

    async def _stream(
        self, job_id: str, output: str, name: str, md5: str | None, write: Callable[[bytes], None]
    ) -> None:
        """One shard's bytes to ``write`` as they arrive (media download), within the budget."""
        bucket, _ = _gs(output)
        url = (f"{self.options.storage_url}/download/storage/v1/b/{quote(bucket, safe='')}/o/"
               f"{quote(name, safe='')}?alt=media")  # fmt: skip
        headers = await self._bearer()
        await self.limiter.acquire(urgent=True)
        check = hashlib.md5()  # noqa: S324 (Cloud Storage's own checksum)
        try:
            async with self._client.stream("GET", url, headers=headers) as response:
                self._count(str(response.status_code))
                self.limiter.observe(response.headers)
                if response.status_code != 200:
                    await response.aread()
                    wait = retry_after(response.headers)
                    if response.status_code == 429:
                        self.limiter.defer(wait if wait is not None else self.limiter.interval * 2)
                    raise ProviderError(f"{self.source}: shard {name} answered "
                                        f"{response.status_code}", retry_after=wait)  # fmt: skip
                async for chunk in response.aiter_bytes():
                    check.update(chunk)
                    write(chunk)
        except httpx.TransportError as exc:
            self._count("error")
            raise ProviderError(f"{self.source}: shard {name}: {type(exc).__name__}") from exc
        if md5 is not None and base64.b64encode(check.digest()).decode() != md5:
            raise ChecksumError(f"{self.source}: shard {name} does not match its md5")


class GoogleDocAI(Provider):
    name = "google-docai"
    status_words = {
        "STATE_UNSPECIFIED": State.QUEUED,
        "WAITING": State.QUEUED,
        "RUNNING": State.RUNNING,
        "CANCELLING": State.RUNNING,
        "SUCCEEDED": State.SUCCEEDED,
        "FAILED": State.FAILED,
        "CANCELLED": State.CANCELLED,
    }
    webhooks = False
    job_api_class = GoogleJobAPI
    table_name = "gcp"
    sdk_loggers = ("google.auth",)
    table_model = GcpOptions
    job_auth = "table"
    result_fields = staticmethod(document_entities)
    cannot_resubmit = (
        "google-docai: an operation keeps where its documents were, but a batch is submitted "
        "by the pipeline (processor, inputs, output bucket), so it must submit it again"
    )

    def __init__(self, options: GcpOptions | None = None) -> None:
        self.options = options or GcpOptions()

    def __repr__(self) -> str:
        return f"GoogleDocAI(location={self.options.location!r})"

    def default_api_base_url(self) -> str | None:
        return f"https://{self.options.location}-documentai.googleapis.com"

    def parse_webhook(
        self, body: Any, *, source: str, message_id: str | None, via: Via = "webhook"
    ) -> Event:
        raise PayloadError("no_webhooks", "Google Document AI sends no webhooks")

    def job_id(self, given: str) -> str:
        """``{project}:{location}:{id}`` from an operation name, that form itself, or a bare id
        when the source's table names its ``project``."""
        text = given.strip()
        found = _NAME.match(text)
        if found is not None:
            parts = list(found.groups())
        elif text.count(":") == 2:
            parts = text.split(":")
        elif ":" not in text and "/" not in text and self.options.project is not None:
            parts = [self.options.project, self.options.location, text]
        else:
            raise ValueError(
                "give the operation name projects/P/locations/L/operations/ID (or P:L:ID; a bare "
                "id needs project in the source's [gcp] table)"
            )
        if not all(_PART.match(part) for part in parts):
            raise ValueError(f"{text[:200]!r} is not a project, a location and an operation id")
        return ":".join(parts)

    def job_path(self, job_id: str) -> str:
        parts = job_id.split(":")
        if len(parts) != 3:
            raise ProviderError(f"google-docai job {job_id!r}: not project:location:operation")
        project, location, operation = (quote(p, safe="") for p in parts)
        return f"/v1/projects/{project}/locations/{location}/operations/{operation}"

    def parse_job(self, body: Any, *, source: str, job_id: str) -> JobStatus:
        # Every operation names itself: without a name the answer is no operation at all (a
        # proxy's ``{}`` would otherwise read as a batch running forever).
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise ProviderError(f"google-docai operation {job_id}: answer is not an operation")
        metadata = _object(body.get("metadata"))
        word = metadata.get("state") if isinstance(metadata.get("state"), str) else None
        done = body.get("done") is True
        error = body.get("error")
        if word is None:
            word = ("FAILED" if error else "SUCCEEDED") if done else "RUNNING"
        state = self.canonical(word, source=source, job_id=job_id)
        if done and not state.terminal:
            state = State.FAILED if error else State.SUCCEEDED
        if isinstance(error, dict):
            return JobStatus(state=State.FAILED if done else state, provider_status=word,
                             error=_status_text(error), error_code=_status_code(error))  # fmt: skip
        if not (done and state is State.SUCCEEDED):
            return JobStatus(state=state, provider_status=word)
        documents = _documents(metadata.get("individualProcessStatuses"))
        failed = [d for d in documents if not d["ok"]]
        if documents and len(failed) == len(documents):
            state = State.FAILED
        elif failed:
            state = State.PARTIAL
        error_text = None
        if failed:
            error_text = f"{len(failed)} of {len(documents)} documents failed: " + "; ".join(
                f"{d['input']}: {_status_text(d['status'])}" for d in failed[:5]
            )
        return JobStatus(
            state=state,
            provider_status=word,
            result=ResultRef(inline=documents, assemble="gcs") if len(failed) < len(documents)
            else None,
            error=error_text,
            error_code=_status_code(failed[0]["status"]) if failed else None,
        )  # fmt: skip


def _documents(statuses: object) -> list[dict[str, Any]]:
    """Each input's ``{input, output, status, ok}`` from ``individualProcessStatuses``."""
    found = []
    for item in statuses if isinstance(statuses, list) else ():
        if not isinstance(item, dict):
            continue
        status = _object(item.get("status"))
        code = status.get("code", 0)
        found.append({
            "input": item.get("inputGcsSource"),
            "output": item.get("outputGcsDestination"),
            "status": status,
            "ok": code in (0, None) and bool(item.get("outputGcsDestination")),
        })  # fmt: skip
    return found


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status_code(status: object) -> str | None:
    """A google.rpc.Status's code as its word (``INVALID_ARGUMENT``)."""
    code = status.get("code") if isinstance(status, dict) else None
    if isinstance(code, int) and not isinstance(code, bool):
        return RPC_CODES.get(code, str(code))
    status_word = status.get("status") if isinstance(status, dict) else None
    return status_word if isinstance(status_word, str) and status_word else None


def _status_text(status: object) -> str:
    if not isinstance(status, dict):
        return "failed"
    code, message = _status_code(status), status.get("message")
    return ": ".join(str(p) for p in (code, message) if isinstance(p, str) and p) or "failed"


def _gs(uri: str) -> tuple[str, str]:
    found = _GS.match(uri)
    if found is None:
        raise ProviderError(f"not a gs:// URI: {uri[:200]!r}")
    return found[1], found[2]


def _load_credentials(options: GcpOptions) -> Credentials:
    """The service-account key's credentials, or the environment's default ones."""
    try:
        import google.auth
        from google.oauth2 import service_account
    except ImportError as exc:
        raise ConfigError("provider 'google-docai' needs jobhook[gcp] (google-auth)") from exc
    if options.credentials is not None:
        info = json.loads(options.credentials.reveal())
        creds: Credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            info, scopes=[SCOPE]
        )
        return creds
    try:
        found, _ = google.auth.default(scopes=[SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise ProviderError(f"no Google credentials: {exc}") from exc
    return found


class _LoopRequest:
    """google-auth's transport ``Request``, called in a worker thread, that sends each request
    on the event loop with the job API's ``httpx.AsyncClient``: its ``[egress]`` proxy and trust
    store, and no second pool."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _HttpxResponse:
        from google.auth import exceptions

        try:
            answer = anyio.from_thread.run(self._send, method, url, body, headers, timeout or 30.0)
        except httpx.HTTPError as exc:
            raise exceptions.TransportError(type(exc).__name__) from exc  # type: ignore[no-untyped-call]
        return _HttpxResponse(answer)

    async def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        headers: dict[str, str] | None,
        seconds: float,
    ) -> httpx.Response:
        return await self._client.request(method, url, content=body, headers=headers,
                                          timeout=seconds)  # fmt: skip


class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers = dict(response.headers)
        self.data = response.content
