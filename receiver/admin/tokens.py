"""Who is calling: the named tokens, their roles and the sources they are limited to, and the
client's address.

Every presented secret is compared with every configured one, each in constant time and none
skipped, so neither the answer's timing nor its length tells which token (or how many) came
close. ``server.admin_token`` is one ``admin`` token named ``admin``, of every source.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from receiver.config.tokens import parse_networks

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.requests import Request

    from receiver.config.settings import ServerSettings
    from receiver.config.tokens import Network
    from receiver.secret import Secret


class Role(enum.IntEnum):
    """What a token may do; each role may do what the ones below it may."""

    READ = 1
    TRACK = 2
    OPERATE = 3
    ADMIN = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def named(cls, name: str) -> Role:
        return cls[name.upper()]


@dataclass(frozen=True, slots=True)
class Principal:
    """A token that matched: its name, role and sources (never its secret)."""

    name: str
    role: Role
    sources: tuple[str, ...] | None = None
    """The only sources whose jobs it sees and acts on; None: every source."""

    def may(self, needed: Role) -> bool:
        return self.role >= needed

    def sees(self, source: str) -> bool:
        """Whether the token may see (and, as its role allows, act on) ``source``'s jobs."""
        return self.sources is None or source in self.sources


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


class Keyring:
    """The configured tokens, as hashes of their secrets; swapped whole by a reload."""

    def __init__(self, tokens: Sequence[tuple[Principal, Sequence[Secret]]]) -> None:
        self._tokens = tuple((who, tuple(secrets)) for who, secrets in tokens)
        self._digests = tuple(
            (who, _digest(secret.reveal())) for who, secrets in self._tokens for secret in secrets
        )
        self._by_name = {who.name: who for who, _ in self._tokens}

    @classmethod
    def from_settings(cls, server: ServerSettings) -> Keyring:
        tokens: list[tuple[Principal, Sequence[Secret]]] = []
        if server.admin_token is not None:
            tokens.append((Principal("admin", Role.ADMIN), (server.admin_token,)))
        tokens.extend(
            (Principal(t.name, Role.named(t.role), t.sources), t.secrets) for t in server.tokens
        )
        return cls(tokens)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def identify(self, given: str) -> Principal | None:
        """The token whose secret ``given`` is, or None; every secret is compared."""
        presented = _digest(given)
        found: Principal | None = None
        for who, digest in self._digests:
            if hmac.compare_digest(presented, digest):
                found = who
        return found

    def principal(self, name: str) -> Principal | None:
        """The token named ``name`` as configured now (a reload may have changed its role or
        its sources)."""
        return self._by_name.get(name)

    def secrets_of(self, name: str) -> tuple[Secret, ...]:
        """A token's secrets, newest first as configured (the console signs sessions with them)."""
        for who, secrets in self._tokens:
            if who.name == name:
                return secrets
        return ()


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    return given.strip()


class Proxies:
    """``server.trusted_proxies``: which peers may name the client in ``X-Forwarded-For``."""

    def __init__(self, networks: Sequence[Network] = ()) -> None:
        self.networks = tuple(networks)

    @classmethod
    def from_settings(cls, server: ServerSettings) -> Proxies:
        return cls(parse_networks(server.trusted_proxies))

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    def client(self, request: Request) -> str:
        """The client's address: the peer's, or, when the peer is a trusted proxy, the
        right-most address of ``X-Forwarded-For`` that is not one (each proxy appends the
        address it saw, so the ones left of the last untrusted hop may be forged)."""
        peer = request.client.host if request.client else ""
        if not self.networks or not self.trusted(peer):
            return peer or "unknown"
        hops = [h.strip() for h in request.headers.get("x-forwarded-for", "").split(",")]
        for hop in reversed([h for h in hops if h]):
            if not self.trusted(hop):
                return hop[:64]
        return peer
