"""``[[server.tokens]]`` and ``server.trusted_proxies``: what is refused, with the key named
and no secret shown, and how the client's address is read behind a trusted proxy."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from starlette.requests import Request

from receiver.admin.tokens import Keyring, Proxies, Role
from receiver.config.load import load_settings
from receiver.config.tokens import parse_networks
from receiver.errors import ConfigError
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

    from receiver.config.settings import Settings


def _load(tmp_path: Path, server: str) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[server]\n{server}\n', encoding="utf-8")
    return load_settings(config, environ={})


def _token(name: str, role: str, secret: str) -> str:
    return f'[[server.tokens]]\nname = "{name}"\nrole = "{role}"\nsecrets = ["{secret}"]\n'


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        (_token("a", "read", "s-1") + _token("a", "admin", "s-2"), "used twice"),
        ('admin_token = "s-0"\n' + _token("admin", "read", "s-1"), "server.admin_token's name"),
        (_token("a", "read", "s-1") + _token("b", "admin", "s-1"), "another token has too"),
        (_token("a", "root", "s-1"), "server.tokens #1.role"),
        (_token("Bad Name", "read", "s-1"), "server.tokens #1.name"),
        ('trusted_proxies = ["10.0.0.0/8", "proxy.local"]', "entry 2 is not an IP address"),
    ],
    ids=["same-name", "admin-name-taken", "shared-secret", "unknown-role", "bad-name", "proxy"],
)
def test_bad_tokens_and_proxies_are_refused_without_their_secrets(
    tmp_path: Path, server: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, server)
    assert problem in str(caught.value)
    assert "s-1" not in str(caught.value)
    assert "s-2" not in str(caught.value)


def test_audit_rows_may_not_be_purged_before_the_jobs_they_name(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text("[retention]\nmax_age_days = 30\naudit_max_age_days = 7\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="audit_max_age_days"):
        load_settings(config, environ={})


def test_the_admin_token_is_an_admin_token_named_admin_beside_the_others(tmp_path: Path) -> None:
    settings = _load(tmp_path, 'admin_token = "s-0"\n' + _token("ci", "track", "s-1"))
    keyring = Keyring.from_settings(settings.server)
    assert keyring.identify("s-0") == keyring.principal("admin")
    assert keyring.principal("admin").role is Role.ADMIN  # type: ignore[union-attr]
    assert keyring.identify("s-1").role is Role.TRACK  # type: ignore[union-attr]
    assert keyring.identify("s-") is None


def _request(peer: str, forwarded: str | None) -> Request:
    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded is not None else []
    return Request({"type": "http", "client": (peer, 1234), "headers": headers})


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("203.0.113.9", "198.51.100.1", "203.0.113.9"),  # not a proxy: the header is ignored
        ("10.0.0.2", "198.51.100.1", "198.51.100.1"),
        ("10.0.0.2", "6.6.6.6, 198.51.100.1, 10.0.0.3", "198.51.100.1"),  # left of it: forged
        ("10.0.0.2", None, "10.0.0.2"),
        ("10.0.0.2", "10.0.0.7", "10.0.0.2"),
    ],
)
def test_the_client_is_the_last_hop_before_the_trusted_proxies(
    peer: str, forwarded: str | None, client: str
) -> None:
    proxies = Proxies(parse_networks(("10.0.0.0/8",)))
    assert proxies.client(_request(peer, forwarded)) == client


def _with_source(tmp_path: Path, tokens: str) -> Settings:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[server]\nadmin_token = "s-0"\n{tokens}\n'
        f'[sources.docs]\nprovider = "reducto"\nsecrets = ["{SECRET}"]\n',
        encoding="utf-8",
    )
    return load_settings(config, environ={})


@pytest.mark.parametrize(
    ("sources", "problem"),
    [
        ("[]", "server.tokens #1.sources: names no source; list the sources the token may use, "
               "or leave sources out for a token of every source"),
        ('["docs", "billing"]', "server.tokens #1 ('ci').sources names unknown source "
                                "'billing'; known: docs"),
    ],
    ids=["empty", "unknown"],
)  # fmt: skip
def test_a_tokens_sources_must_be_some_configured_ones(
    tmp_path: Path, sources: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _with_source(tmp_path, _token("ci", "track", "s-1") + f"sources = {sources}\n")
    assert problem in str(caught.value)
    assert "s-1" not in str(caught.value)


def test_a_token_may_be_limited_to_sources_and_the_admin_token_never_is(tmp_path: Path) -> None:
    tokens = _token("ci", "track", "s-1") + 'sources = ["docs", "docs"]\n'
    settings = _with_source(tmp_path, tokens + _token("all", "read", "s-2"))
    keyring = Keyring.from_settings(settings.server)
    ci, every, admin = keyring.identify("s-1"), keyring.identify("s-2"), keyring.identify("s-0")
    assert ci is not None
    assert every is not None
    assert admin is not None
    assert (ci.sources, every.sources, admin.sources) == (("docs",), None, None)
    assert (ci.sees("docs"), ci.sees("billing"), admin.sees("billing")) == (True, False, True)
