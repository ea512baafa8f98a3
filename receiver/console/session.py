"""The console's session: a signed cookie made from a login with the admin token.

The cookie holds ``v1.<expires>.<nonce>.<signature>``: never the token. The signature is an
HMAC-SHA256 keyed by a hash of the admin token, so every replica sharing the token accepts the
others' cookies and a new token ends every session. The CSRF token of a session is another
HMAC of its nonce, so it needs no storage either.
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

    from receiver.secret import Secret

COOKIE = "jobhook_console"
LIFETIME_SECONDS = 12 * 3600
MAX_COOKIE = 200


@dataclass(frozen=True, slots=True)
class Session:
    """A valid session: its nonce (which its CSRF token derives from) and when it ends."""

    nonce: str
    expires: int


class Sessions:
    """Makes and checks the session cookies and CSRF tokens of one admin token."""

    def __init__(self, token: Secret, lifetime: float = LIFETIME_SECONDS) -> None:
        self._token = token
        self._key = hashlib.sha256(b"jobhook console session\0" + token.reveal().encode()).digest()
        self.lifetime = lifetime

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def token_matches(self, given: str) -> bool:
        """The admin token, compared in constant time (hashes, so length leaks nothing)."""
        want = hashlib.sha256(self._token.reveal().encode()).digest()
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), want)

    def new_cookie(self, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.lifetime)
        body = f"v1.{expires}.{secrets.token_urlsafe(18)}"
        return f"{body}.{self._sign(body)}"

    def check(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session a cookie holds, or None when it is absent, forged or expired."""
        if not cookie or len(cookie) > MAX_COOKIE:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature.encode(), self._sign(body).encode()):
            return None
        version, _, rest = body.partition(".")
        expires, _, nonce = rest.partition(".")
        if version != "v1" or not expires.isdigit() or not nonce:
            return None
        if int(expires) <= (time.time() if now is None else now):
            return None
        return Session(nonce, int(expires))

    def csrf(self, session: Session) -> str:
        """The CSRF token every form of this session carries."""
        return self._sign(f"csrf.{session.nonce}")[:32]

    def csrf_matches(self, session: Session, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(
            given.encode(), self.csrf(session).encode()
        )

    def set_cookie(self, request: Request, response: Response) -> None:
        """Log the browser in: HttpOnly, SameSite=Strict, Secure over TLS, expiring."""
        response.set_cookie(
            COOKIE,
            self.new_cookie(),
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
