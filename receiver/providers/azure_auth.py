"""Microsoft Entra ID tokens for Azure sources, from azure-identity's credentials.

A source that signs in with Entra ID (``[sources.NAME.azure] auth = "entra"``) sends
``Authorization: Bearer`` with a token for ``https://cognitiveservices.azure.com/.default``
instead of its key; a batch analysis's result container without a SAS is read with a token for
``https://storage.azure.com/.default`` from the same credential. The credential is a client
secret, a certificate, or (neither set) azure-identity's credentials of the environment, tried
in turn: ``EnvironmentCredential`` (``AZURE_CLIENT_SECRET`` or ``AZURE_CLIENT_CERTIFICATE_PATH``),
``WorkloadIdentityCredential`` (``AZURE_FEDERATED_TOKEN_FILE``), ``ManagedIdentityCredential``
(``IDENTITY_ENDPOINT``, else the instance metadata service); the developer tools' credentials
(CLI, PowerShell, VS Code) are left out, as a service has none.

azure-identity's asyncio credentials (``azure.identity.aio``) are used, with ``httpx_transport``
as their transport: every token request goes through the job API's own ``httpx.AsyncClient``,
so ``[egress]`` (proxy, ``no_proxy``, CA bundle or trust store) applies to it as to every other
request, and no thread is needed. Tokens are kept per scope and renewed ``TOKEN_EARLY`` seconds
before they expire (or from the ``refresh_on`` the token endpoint gives).
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import structlog
from pydantic import BeforeValidator

from receiver import jsontext
from receiver.errors import ConfigError, ProviderError
from receiver.secret import Secret, resolve_secret

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, MutableMapping

    from azure.core.credentials import AccessTokenInfo
    from azure.core.credentials_async import AsyncSupportsTokenInfo
    from azure.core.rest import HttpRequest
    from pydantic import ValidationInfo

log = structlog.get_logger(__name__)

DOCINTEL_SCOPE = "https://cognitiveservices.azure.com/.default"
STORAGE_SCOPE = "https://storage.azure.com/.default"
AUTHORITY = "https://login.microsoftonline.com"
TOKEN_EARLY = 300.0
"""A token is renewed this many seconds before it expires."""


def _secret(value: object, info: ValidationInfo) -> Secret | None:
    if value is None or isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string: the value, 'env:NAME' or 'file:PATH'")
    env = info.context.get("env") if isinstance(info.context, dict) else None
    return Secret(resolve_secret(value, env))


OptionalSecret = Annotated[Secret | None, BeforeValidator(_secret)]
"""A secret setting that may be unset (``env:NAME`` and ``file:PATH`` resolved)."""


class TokenSource:
    """Entra ID access tokens for one source, per scope, cached and renewed before expiry."""

    def __init__(
        self,
        *,
        source: str,
        client: httpx.AsyncClient,
        tenant_id: str | None = None,
        client_id: str | None = None,
        client_secret: Secret | None = None,
        certificate: Secret | None = None,
        authority: str = AUTHORITY,
        disable_instance_discovery: bool = False,
        early: float = TOKEN_EARLY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self._client = client
        self._tenant_id = tenant_id
        self._client_id = client_id
        self._client_secret = client_secret
        self._certificate = certificate
        self._authority = authority
        self._no_discovery = disable_instance_discovery
        self._early = early
        self._clock = clock
        self._credential: AsyncSupportsTokenInfo | None = None
        self._tokens: dict[str, AccessTokenInfo] = {}
        self._lock = asyncio.Lock()
        self.requested = 0
        """Tokens asked of the credential (the rest came from the cache)."""

    def __repr__(self) -> str:
        return f"TokenSource(source={self.source!r}, authority={self._authority!r})"

    async def bearer(self, scope: str) -> dict[str, str]:
        """The ``Authorization`` header with a token for ``scope``."""
        return {"Authorization": f"Bearer {await self.token(scope)}"}

    async def token(self, scope: str) -> str:
        """A token for ``scope``: the cached one while it is fresh, else a new one;
        ProviderError (retried later) when the credential cannot get one."""
        async with self._lock:
            now = self._clock()
            cached = self._tokens.get(scope)
            if cached is not None and not self._due(cached, now):
                found: str = cached.token
                return found
            credential = self._credential
            if credential is None:
                credential = self._credential = self._build()
            self.requested += 1
            try:
                info = await credential.get_token_info(scope)
            except Exception as exc:  # azure.core/azure.identity errors and transport failures
                reason = str(exc).splitlines()[0][:300] if str(exc) else ""
                raise ProviderError(
                    f"{self.source}: no Entra ID token for {scope}: {type(exc).__name__}"
                    + (f": {reason}" if reason else "")
                ) from exc
            self._tokens[scope] = info
            log.info("entra_token", source=self.source, scope=scope,
                     expires_in=round(info.expires_on - now))  # fmt: skip
            token: str = info.token
            return token

    def _due(self, info: AccessTokenInfo, now: float) -> bool:
        if info.refresh_on is not None and now >= info.refresh_on:
            return True
        return info.expires_on - now < self._early

    def _build(self) -> AsyncSupportsTokenInfo:
        try:
            from azure.identity import aio as identity
        except ImportError as exc:
            raise ConfigError(
                f"{self.source}: Entra ID needs jobhook[azure] (azure-identity)"
            ) from exc
        common: dict[str, Any] = {
            "transport": httpx_transport(self._client),
            "authority": self._authority,
            "disable_instance_discovery": self._no_discovery,
        }
        if self._client_secret is not None or self._certificate is not None:
            if not (self._tenant_id and self._client_id):
                raise ConfigError(f"{self.source}: a client secret or certificate needs "
                                  "tenant_id and client_id")  # fmt: skip
            if self._client_secret is not None:
                return identity.ClientSecretCredential(
                    self._tenant_id, self._client_id, self._client_secret.reveal(), **common
                )
            assert self._certificate is not None
            return identity.CertificateCredential(
                self._tenant_id, self._client_id,
                certificate_data=self._certificate.reveal().encode(), **common,
            )  # fmt: skip
        # azure-identity's chain, built here so that every member takes the authority (its
        # DefaultAzureCredential leaves it out of workload identity) and the transport.
        chain: list[Any] = [identity.EnvironmentCredential(**common)]
        if os.environ.get("AZURE_FEDERATED_TOKEN_FILE"):
            chain.append(identity.WorkloadIdentityCredential(
                tenant_id=self._tenant_id or os.environ.get("AZURE_TENANT_ID"),
                client_id=self._client_id or os.environ.get("AZURE_CLIENT_ID"), **common,
            ))  # fmt: skip
        chain.append(identity.ManagedIdentityCredential(
            client_id=self._client_id, transport=common["transport"]
        ))  # fmt: skip
        return identity.ChainedTokenCredential(*chain)

    async def aclose(self) -> None:
        """Close the credential (never the client: it is the job API's)."""
        if self._credential is not None:
            await self._credential.close()
            self._credential = None


def httpx_transport(client: httpx.AsyncClient) -> Any:
    """An azure-core asynchronous transport that sends through ``client`` (closing it leaves
    the client open). Its classes are made at first use: importing this module needs no
    azure-core."""
    return _transport_class()(client)


@functools.cache
def _transport_class() -> type[Any]:
    from azure.core.exceptions import HttpResponseError, ServiceRequestError
    from azure.core.pipeline.transport import AsyncHttpTransport
    from azure.core.rest import AsyncHttpResponse

    class _Response(AsyncHttpResponse):
        def __init__(self, request: HttpRequest, answer: httpx.Response) -> None:
            self._request = request
            self._answer = answer
            self._encoding: str | None = None

        @property
        def request(self) -> HttpRequest:
            return self._request

        @property
        def status_code(self) -> int:
            return self._answer.status_code

        @property
        def headers(self) -> MutableMapping[str, str]:
            return self._answer.headers

        @property
        def reason(self) -> str:
            return self._answer.reason_phrase

        @property
        def content_type(self) -> str | None:
            kind: str | None = self._answer.headers.get("content-type")
            return kind

        @property
        def is_closed(self) -> bool:
            return True

        @property
        def is_stream_consumed(self) -> bool:
            return True

        @property
        def encoding(self) -> str | None:
            return self._encoding or self._answer.encoding

        @encoding.setter
        def encoding(self, value: str | None) -> None:
            self._encoding = value

        @property
        def url(self) -> str:
            return str(self._answer.url)

        @property
        def content(self) -> bytes:
            return self._answer.content

        def text(self, encoding: str | None = None) -> str:
            return self._answer.content.decode(encoding or self.encoding or "utf-8", "replace")

        def json(self) -> Any:
            return jsontext.loads(self._answer.content) if self._answer.content else None

        def raise_for_status(self) -> None:
            if self.status_code >= 400:
                raise HttpResponseError(response=self)

        async def read(self) -> bytes:
            return self._answer.content

        async def iter_raw(self, **kwargs: Any) -> AsyncIterator[bytes]:
            yield self._answer.content

        async def iter_bytes(self, **kwargs: Any) -> AsyncIterator[bytes]:
            yield self._answer.content

        async def close(self) -> None:
            return None

        async def __aexit__(self, *args: object) -> None:
            return None

    class _Transport(AsyncHttpTransport):  # type: ignore[type-arg]
        def __init__(self, client: httpx.AsyncClient) -> None:
            self._client = client

        async def __aenter__(self) -> Any:
            return self

        async def __aexit__(self, *args: object) -> None:
            return None

        async def open(self) -> None:
            return None

        async def close(self) -> None:
            return None

        async def send(self, request: HttpRequest, **kwargs: Any) -> Any:
            body = request.content
            try:
                if isinstance(body, dict):
                    answer = await self._client.request(
                        request.method, request.url, headers=dict(request.headers), data=body
                    )
                else:
                    answer = await self._client.request(
                        request.method, request.url, headers=dict(request.headers),
                        content=body.encode() if isinstance(body, str) else body,
                    )  # fmt: skip
            except httpx.HTTPError as exc:
                raise ServiceRequestError(type(exc).__name__, error=exc) from exc
            return _Response(request, answer)

    return _Transport
