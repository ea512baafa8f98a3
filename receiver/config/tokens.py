"""``[[server.tokens]]``: named admin tokens, each with a role, and the proxies trusted to say
who the client is.

Roles are ordered: each may do what the one before it may, and more. ``read`` sees jobs,
events, stats, exports and the console; ``track`` also registers jobs (what a pipeline needs);
``operate`` also replays; ``admin`` also reprocesses at the provider (which costs money) and
reads the audit trail. ``sources`` limits a token to some sources' jobs, whatever its role: a
pipeline's token need not see, or register, another team's.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from receiver.config.base import SecretValue, _Section

if TYPE_CHECKING:
    from collections.abc import Collection

ROLES = ("read", "track", "operate", "admin")
Role = Literal["read", "track", "operate", "admin"]
_TOKEN_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TokenSettings(_Section):
    """One named token: its secrets (several while it is rotated), its role, and the sources
    whose jobs it may see and act on (None: every source)."""

    name: str
    secrets: tuple[SecretValue, ...] = Field(min_length=1, max_length=8)
    role: Role
    sources: tuple[str, ...] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _TOKEN_NAME.match(name):
            raise ValueError("must be 1-64 lowercase letters, digits, '_' or '-'")
        return name

    @field_validator("sources")
    @classmethod
    def _some_sources(cls, sources: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if sources is not None and not sources:
            # An empty list would be a token that sees nothing: surely a mistake, and one
            # that "every source" (leaving the key out) must not be mistaken for.
            raise ValueError(
                "names no source; list the sources the token may use, or leave sources out "
                "for a token of every source"
            )
        return None if sources is None else tuple(dict.fromkeys(sources))


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


def check_token_sources(tokens: tuple[TokenSettings, ...], configured: Collection[str]) -> None:
    """Every source a token is limited to is configured: a misspelt one would leave the token
    without the jobs it was meant for, silently."""
    for number, token in enumerate(tokens, 1):
        for source in token.sources or ():
            if source not in configured:
                raise ValueError(
                    f"server.tokens #{number} ({token.name!r}).sources names unknown source "
                    f"{source!r}; known: {', '.join(sorted(configured)) or 'none'}"
                )


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
