"""Settings: TOML (``--config`` / ``JOBHOOK_CONFIG``) plus ``JOBHOOK_*`` overrides, validated once.

Every secret may be a literal, ``env:NAME`` or ``file:PATH``. Errors name the key and the
problem and never the secret's value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from receiver.config.base import SecretValue as SecretValue  # re-exported: handler options use it
from receiver.config.base import _Section
from receiver.config.sources import PollSettings as PollSettings  # re-exported, as before
from receiver.config.sources import SourceSettings as SourceSettings
from receiver.config.tokens import (
    TokenSettings,
    check_token_sources,
    check_tokens,
    parse_networks,
)
from receiver.config.tracing import TracingSettings
from receiver.models import State
from receiver.signatures.svix import check_svix_secret as check_svix_secret  # its old home

ENV_PREFIX = "JOBHOOK_"
DEFAULT_CONFIG = Path("jobhook.toml")
_LEVELS = ("debug", "info", "warning", "error", "critical")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)
    body_timeout_seconds: float = Field(10.0, gt=0)
    """A webhook body must arrive within this many seconds of its headers, else 408."""
    admin_token: SecretValue | None = None
    """One ``admin`` token named ``admin``, beside any ``[[server.tokens]]``."""
    tokens: tuple[TokenSettings, ...] = ()
    """``[[server.tokens]]``: named tokens, each with a role (read, track, operate, admin) and
    optionally the ``sources`` it is limited to."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks of proxies whose ``X-Forwarded-For`` names the client (for the
    audit trail and the login throttle); from any other peer the header is ignored."""
    login_attempts: int = Field(10, ge=1, le=10_000)
    """Failed console logins one client address may make per ``login_window_seconds``."""
    login_window_seconds: float = Field(300.0, gt=0, le=86_400)
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    reload_watch_seconds: float = Field(2.0, ge=0, le=3600)
    """How often ``serve`` looks for a changed config file or ``file:`` secret; 0: never."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        parse_networks(values)
        return values

    @model_validator(mode="after")
    def _token_names(self) -> ServerSettings:
        check_tokens(self.tokens, self.admin_token)
        return self

    @property
    def any_token(self) -> bool:
        """Whether the admin routes and the console are served at all."""
        return self.admin_token is not None or bool(self.tokens)


class StoreSettings(_Section):
    url: str = ""
    require_synchronous_replication: bool = False
    """Refuse to start on PostgreSQL unless commits wait for a synchronous standby."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if url and not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        if url.startswith(("postgresql://", "postgres://")):
            check_postgres_hosts(url)
        return url


_PG_SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
_PG_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\[\]:/]*)(?::(\d{1,5}))?$")


def check_postgres_hosts(url: str) -> None:
    """A PostgreSQL URL's host list (``host:p1,host:p2``) and ``target_session_attrs`` as
    asyncpg reads them; errors never repeat the URL (it may hold a password)."""
    netloc, _, rest = url.split("://", 1)[1].partition("/")
    hosts = netloc.rpartition("@")[2]
    # One host's form is checked with the rest of the URL before start (preflight).
    for host in hosts.split(",") if "," in hosts else ():
        match = _PG_HOST.match(host)
        if match is None or (match[2] is not None and not 0 < int(match[2]) < 65536):
            raise ValueError(
                "a host in the PostgreSQL URL is not host, host:port or [ipv6]:port "
                "(several hosts: postgresql://user@host1:5432,host2:5432/db)"
            )
    query = parse_qs(rest.partition("?")[2])
    attrs = query.get("target_session_attrs", ["any"])[-1]
    if attrs not in _PG_SESSION_ATTRS:
        raise ValueError(f"target_session_attrs must be one of {', '.join(_PG_SESSION_ATTRS)}")
    if attrs in ("standby", "prefer-standby", "read-only"):
        raise ValueError(
            "jobhook writes to its store: target_session_attrs must be read-write (or primary)"
        )
    if "," in hosts and attrs not in ("read-write", "primary"):
        raise ValueError(
            "a PostgreSQL URL with several hosts needs ?target_session_attrs=read-write, or "
            "after a failover jobhook may connect to a standby that cannot take writes"
        )


class ResultsSettings(_Section):
    dir: Path = Path()
    max_bytes: int = Field(2 * 1024**3, gt=0)
    allowed_hosts: tuple[str, ...] = ()
    allow_http: bool = False
    allow_private_networks: bool = False
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(60.0, gt=0)
    max_attempts: int = Field(5, ge=1)

    @field_validator("allowed_hosts")
    @classmethod
    def _no_catch_all(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        for host in hosts:
            if host.strip() in {"*", "*.", "*.*", "**"}:
                raise ValueError(
                    f"{host.strip()!r} would let a presigned URL reach any host; list the "
                    'provider\'s storage hosts, e.g. ["*.s3.amazonaws.com"]'
                )
            if "://" in host or "/" in host:
                raise ValueError(
                    f'{host!r} is a URL; list host names only, e.g. "bucket.s3.amazonaws.com"'
                )
        return hosts


class EgressSettings(_Section):
    """``[egress]``: the proxy and trust of every outbound connection (pipeline.egress)."""

    proxy: SecretValue | None = None
    no_proxy: tuple[str, ...] | None = None
    ca_bundle: Path | None = None
    truststore: bool = False
    environment: bool = True
    """Unset ``proxy`` / ``no_proxy`` come from HTTPS_PROXY / NO_PROXY, as curl and httpx read
    them; false ignores the environment."""


class HandlerSettings(_Section):
    model_config = ConfigDict(frozen=True, extra="allow")

    name: str
    type: str
    sources: tuple[str, ...] | None = None
    states: tuple[State, ...] | None = None
    max_attempts: int = Field(8, ge=1)
    backoff_initial: float = Field(1.0, gt=0)
    backoff_max: float = Field(300.0, gt=0)
    circuit_failures: int = Field(5, ge=1)
    """Failed attempts in a row that open the handler's circuit."""
    circuit_cooldown_seconds: float = Field(30.0, gt=0, le=86400)
    """How long an open circuit waits before it lets one probe delivery through."""
    max_concurrency: int | None = Field(None, ge=1)
    """Dispatch slots this handler may hold at once; unset, half of ``dispatch.concurrency``
    (at least 1), so a destination that hangs never holds every slot."""

    @property
    def options(self) -> dict[str, Any]:
        """Handler-specific keys (``dir``, ``url``, ...), passed to the handler's factory."""
        return dict(self.model_extra or {})

    def __repr_args__(self) -> Any:
        # Handler options may hold literal secrets (an http handler's whsec_, a queue URL with a
        # password): show their keys, never their values.
        for key, value in super().__repr_args__():
            if key in type(self).model_fields:
                yield key, value
        yield "options", sorted(self.options)

    def matches(self, source: str, state: State) -> bool:
        return (self.sources is None or source in self.sources) and (
            self.states is None or state in self.states
        )


class DispatchSettings(_Section):
    concurrency: int = Field(8, ge=1)
    lease_seconds: float = Field(60.0, gt=0)
    # A replica silent for three intervals is dead: the others take its claims back.
    heartbeat_seconds: float = Field(2.0, gt=0)
    # Warn (and say so in /readyz) when confirmations cannot drain this fast at the budget.
    confirmation_drain_seconds: float = Field(600.0, gt=0)


class RetentionSettings(_Section):
    """``[retention]``: what is purged, and when; work not yet delivered never is."""

    # A purged delivery no longer dedupes a resend, so keep more than Svix's ~27.5 h of retries.
    max_age_days: float | None = Field(None, ge=2)
    delete_results_when_delivered: bool = False
    audit_max_age_days: float | None = Field(None, ge=1)
    """Audit rows older than this are purged (unset: kept); never before the jobs they name,
    so it is at least ``max_age_days`` when both are set."""

    @model_validator(mode="after")
    def _audit_outlives_jobs(self) -> RetentionSettings:
        audit, jobs = self.audit_max_age_days, self.max_age_days
        if audit is not None and (jobs is None or audit < jobs):
            raise ValueError(
                "audit_max_age_days would purge audit rows of jobs still kept; set it to at "
                "least max_age_days (and set max_age_days)"
            )
        return self

    interval_seconds: float = Field(300.0, gt=0)


class LogSettings(_Section):
    level: str = "info"
    format: Literal["auto", "json", "console"] = "auto"

    @field_validator("level")
    @classmethod
    def _known_level(cls, level: str) -> str:
        if level.lower() not in _LEVELS:
            raise ValueError(f"unknown level; use one of {', '.join(_LEVELS)}")
        return level.lower()


class Settings(_Section):
    """The whole configuration, read once at startup."""

    data_dir: Path = Path("data")
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    results: ResultsSettings = ResultsSettings()
    egress: EgressSettings = EgressSettings()
    dispatch: DispatchSettings = DispatchSettings()
    retention: RetentionSettings = RetentionSettings()
    log: LogSettings = LogSettings()
    tracing: TracingSettings | None = None
    """``[tracing]``: None when the table is absent (then only ``OTEL_*`` can turn it on)."""
    sources: dict[str, SourceSettings] = {}
    handlers: tuple[HandlerSettings, ...] = ()

    @field_validator("sources")
    @classmethod
    def _source_names(cls, sources: dict[str, SourceSettings]) -> dict[str, SourceSettings]:
        for name in sources:
            if not _NAME.match(name):
                raise ValueError(
                    f"source name {name!r} must be 1-64 lowercase letters, digits, '_' or '-'"
                    " (it is the webhook URL's last part); rename the [sources.NAME] table"
                )
        return sources

    @field_validator("handlers")
    @classmethod
    def _handler_names(
        cls, handlers: tuple[HandlerSettings, ...], info: ValidationInfo
    ) -> tuple[HandlerSettings, ...]:
        sources = info.data.get("sources")  # absent when refused: its own error suffices
        seen: set[str] = set()
        for handler in handlers:
            if handler.name in seen:
                raise ValueError(
                    f"handler name {handler.name!r} is used twice; give each [[handlers]] "
                    "entry its own name"
                )
            seen.add(handler.name)
            for source in handler.sources or ():
                if sources is not None and source not in sources:
                    raise ValueError(
                        f"handler {handler.name!r} names unknown source {source!r}; known: "
                        f"{', '.join(sorted(sources)) or 'none'}"
                    )
        return handlers

    @model_validator(mode="after")
    def _token_sources(self) -> Settings:
        check_token_sources(self.server.tokens, self.sources)
        return self

    @model_validator(mode="after")
    def _derive_paths(self) -> Settings:
        # Paths left empty follow data_dir; frozen models are changed once, here.
        if not self.store.url:
            url = f"sqlite:///{self.data_dir / 'jobhook.db'}"
            object.__setattr__(self, "store", self.store.model_copy(update={"url": url}))
        if self.results.dir == Path():
            results = self.results.model_copy(update={"dir": self.data_dir / "results"})
            object.__setattr__(self, "results", results)
        return self
