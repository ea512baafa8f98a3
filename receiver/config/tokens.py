"""``[[server.tokens]]``: named admin tokens, each with a role, and the proxies trusted to say
who the client is.

Roles are ordered: each may do what the one before it may, and more. ``read`` sees jobs,
events, stats, exports and the console; ``track`` also registers jobs (what a pipeline needs);
``operate`` also replays; ``admin`` also reprocesses at the provider (which costs money) and
reads the audit trail.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from receiver.config.base import SecretValue, _Section

ROLES = ("read", "track", "operate", "admin")
Role = Literal["read", "track", "operate", "admin"]
_TOKEN_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TokenSettings(_Section):
    """One named token: its secrets (several while it is rotated) and its role."""

    name: str
    secrets: tuple[SecretValue, ...] = Field(min_length=1, max_length=8)
    role: Role

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _TOKEN_NAME.match(name):
            raise ValueError("must be 1-64 lowercase letters, digits, '_' or '-'")
        return name


def check_tokens(tokens: tuple[TokenSettings, ...], admin_token: object) -> None:
    """Names unique (``admin`` is ``server.admin_token``'s when it is set), and no secret
    shared by two tokens: a request must name one token, never two."""
    names = ["admin"] if admin_token is not None else []
    seen = [admin_token] if admin_token is not None else []
    for token in tokens:
        if token.name in names:
            taken = " (server.admin_token's name)" if token.name == "admin" and admin_token else ""
            raise ValueError(f"token name {token.name!r} is used twice{taken}; rename one")
        names.append(token.name)
        for secret in token.secrets:
            if secret in seen:
                raise ValueError(
                    f"token {token.name!r} has a secret another token has too; give each "
                    "token its own secrets"
                )
            seen.append(secret)


def parse_networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    """``server.trusted_proxies``: addresses or networks (``10.0.0.0/8``), as networks."""
    networks: list[Network] = []
    for number, value in enumerate(values, 1):
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"entry {number} is not an IP address or network (e.g. 10.0.0.0/8 or ::1)"
            ) from None
    return tuple(networks)
