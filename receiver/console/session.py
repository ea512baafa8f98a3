"""The console's session: a signed cookie made from a login with a token.

The cookie holds ``v2.<expires>.<nonce>.<token name>.<signature>``: never the token. The
signature is an HMAC-SHA256 keyed by a hash of the token's secret, so every replica sharing the
token accepts the others' cookies, and a session ends when its token (or the secret it was
signed with) is removed. The role is looked up at each request, so a changed role applies from
the next one. The CSRF token of a session is another HMAC of its nonce, so it needs no storage
either.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from receiver.admin.tokens import Keyring, Principal
    from receiver.secret import Secret

COOKIE = "jobhook_console"
LIFETIME_SECONDS = 12 * 3600
MAX_COOKIE = 300


@dataclass(frozen=True, slots=True)
class Session:
    """A valid session: its nonce (which its CSRF token derives from), when it ends, and the
    token it was made with, as configured now."""

    nonce: str
    expires: int
    who: Principal
    key: bytes = b""
    """The key that signed it: its forms' CSRF tokens are signed with it too."""


def _key(secret: Secret) -> bytes:
    return hashlib.sha256(b"jobhook console session\0" + secret.reveal().encode()).digest()


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


class Sessions:
    """Makes and checks the session cookies and CSRF tokens of the configured tokens."""

    def __init__(self, keyring: Keyring, lifetime: float = LIFETIME_SECONDS) -> None:
        self.keyring = keyring
        self.lifetime = lifetime

    def identify(self, given: str) -> Principal | None:
        """The token ``given`` is, compared in constant time with every one (as hashes, so its
        length leaks nothing)."""
        return self.keyring.identify(given)

    def new_cookie(self, who: Principal, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.lifetime)
        body = f"v2.{expires}.{secrets.token_urlsafe(18)}.{who.name}"
        key = _key(self.keyring.secrets_of(who.name)[0])
        return f"{body}.{_sign(key, body)}"

    def check(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session a cookie holds, or None when it is absent, forged, expired or its
        token (or the secret it was signed with) is no longer configured."""
        if not cookie or len(cookie) > MAX_COOKIE:
            return None
        body, _, signature = cookie.rpartition(".")
        parts = body.split(".")
        if len(parts) != 4 or parts[0] != "v2" or not parts[1].isdigit() or not parts[2]:
            return None
        _, expires, nonce, name = parts
        who = self.keyring.principal(name)
        if who is None:
            return None
        signed_with = b""
        for secret in self.keyring.secrets_of(name):
            key = _key(secret)
            if hmac.compare_digest(signature.encode(), _sign(key, body).encode()):
                signed_with = key
        if not signed_with or int(expires) <= (time.time() if now is None else now):
            return None
        return Session(nonce, int(expires), who, signed_with)

    def csrf(self, session: Session) -> str:
        """The CSRF token every form of this session carries."""
        return _sign(session.key, f"csrf.{session.nonce}")[:32]

    def csrf_matches(self, session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(
            given.encode(), self.csrf(session).encode()
        )

    def set_cookie(self, request: Request, response: Response, who: Principal) -> None:
        """Log the browser in: HttpOnly, SameSite=Strict, Secure over TLS, expiring."""
        response.set_cookie(
            COOKIE,
            self.new_cookie(who),
            max_age=int(self.lifetime),
            path="/ui",
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="strict",
        )

    @staticmethod
    def clear_cookie(request: Request, response: Response) -> None:
        response.delete_cookie(
            COOKIE,
            path="/ui",
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="strict",
        )
