"""A Microsoft Entra ID token endpoint, as azure-identity speaks to it, for offline tests.

``POST /{tenant}/oauth2/v2.0/token`` (client credentials: a ``client_secret``, or a
``client_assertion`` JWT as a certificate or workload identity sends) and its OpenID metadata
at ``/{tenant}/v2.0/.well-known/openid-configuration``; ``GET /msi/token`` answers as App
Service's managed identity endpoint (``IDENTITY_ENDPOINT``, header ``X-IDENTITY-HEADER``).
Tokens are shaped as Entra ID's (a JWT: ``iss`` ``https://sts.windows.net/{tenant}/``,
``aud``, ``iat``/``nbf``/``exp``, ``appid``, ``tid``; signed by no key, so only what issued them
can tell them valid) and remembered with their audience (the scope without ``/.default``) and
expiry: the Document Intelligence simulator checks a bearer token with ``valid`` as it checks a
key, and Azurite (``--oauth basic``) reads their claims as it reads Entra ID's. An assertion's
signature is not checked (its issuer and subject must be the client id).
azure-identity takes only an https authority: serve this app with TLS (a test CA).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@dataclass
class EntraSim:
    """Registered applications (client id → secret), the managed identity's header, tokens."""

    apps: dict[str, str] = field(default_factory=dict)
    """Client ids and their secrets; an app whose secret is ``""`` signs in with assertions."""
    identity_header: str = ""
    """The ``X-IDENTITY-HEADER`` the managed identity endpoint requires."""
    lifetime: float = 3600.0
    clock: Callable[[], float] = time.time
    issued: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Token → (audience, expiry)."""
    requests: list[str] = field(default_factory=list)
    """What was asked, in order: ``client_secret``, ``client_assertion``, ``managed_identity``."""

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/{tenant}/v2.0/.well-known/openid-configuration", self._metadata),
            Route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"]),
            Route("/msi/token", self._managed, methods=["GET"]),
        ])  # fmt: skip

    def valid(self, token: str, audience: str) -> bool:
        """Whether ``token`` was issued here for ``audience`` and has not expired."""
        found = self.issued.get(token)
        return found is not None and found[0] == audience and found[1] > self.clock()

    def _issue(self, audience: str, tenant: str, client_id: str) -> tuple[str, float]:
        now = int(self.clock())
        claims = {"aud": audience, "iss": f"https://sts.windows.net/{tenant}/", "iat": now,
                  "nbf": now, "exp": now + int(self.lifetime), "appid": client_id,
                  "tid": tenant, "jti": secrets.token_urlsafe(16)}  # fmt: skip
        token = ".".join(_part(p) for p in ({"typ": "JWT", "alg": "RS256"}, claims)) + "."
        token += _part({"sig": secrets.token_urlsafe(32)})
        self.issued[token] = (audience, now + self.lifetime)
        return token, self.lifetime

    async def _metadata(self, request: Request) -> JSONResponse:
        origin = f"{request.url.scheme}://{request.url.netloc}"
        tenant = request.path_params["tenant"]
        return JSONResponse({
            "issuer": f"{origin}/{tenant}/v2.0",
            "token_endpoint": f"{origin}/{tenant}/oauth2/v2.0/token",
            "authorization_endpoint": f"{origin}/{tenant}/oauth2/v2.0/authorize",
            "jwks_uri": f"{origin}/{tenant}/discovery/v2.0/keys",
            "response_types_supported": ["code", "token"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
        })  # fmt: skip

    async def _token(self, request: Request) -> JSONResponse:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        client_id, scope = str(form.get("client_id", "")), str(form.get("scope", ""))
        if form.get("grant_type") != "client_credentials" or client_id not in self.apps:
            return _refuse("unauthorized_client", "AADSTS700016: application not found")
        secret = form.get("client_secret")
        if isinstance(secret, str):
            self.requests.append("client_secret")
            wanted = self.apps[client_id]
            if not wanted or not hmac.compare_digest(secret.encode(), wanted.encode()):
                return _refuse("invalid_client", "AADSTS7000215: invalid client secret")
        elif form.get("client_assertion_type") == ASSERTION_TYPE:
            self.requests.append("client_assertion")
            claims = _claims(str(form.get("client_assertion", "")))
            if claims.get("iss") != client_id or claims.get("sub") != client_id:
                return _refuse("invalid_client", "AADSTS700027: invalid client assertion")
        else:
            return _refuse("invalid_request", "AADSTS900144: no client credential")
        audience = scope.split()[0].removesuffix("/.default") if scope else ""
        token, lifetime = self._issue(audience, request.path_params["tenant"], client_id)
        return JSONResponse({"token_type": "Bearer", "expires_in": int(lifetime),
                             "ext_expires_in": int(lifetime), "access_token": token})  # fmt: skip

    async def _managed(self, request: Request) -> JSONResponse:
        self.requests.append("managed_identity")
        header = request.headers.get("x-identity-header", "")
        if not self.identity_header or not hmac.compare_digest(
            header.encode(), self.identity_header.encode()
        ):
            return JSONResponse({"error": "invalid header"}, status_code=401)
        resource = request.query_params.get("resource", "")
        token, lifetime = self._issue(resource.rstrip("/"), "managed", "managed-identity")
        return JSONResponse({"access_token": token, "token_type": "Bearer",
                             "expires_on": str(int(self.clock() + lifetime)),
                             "resource": resource})  # fmt: skip


def _claims(assertion: str) -> dict[str, Any]:
    parts = assertion.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def _part(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _refuse(error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=401)
