"""Settings: TOML (``--config`` / ``JOBHOOK_CONFIG``) plus ``JOBHOOK_*`` overrides, validated once.

Every secret may be a literal, ``env:NAME`` or ``file:PATH``. Errors name the key and the
problem and never the secret's value.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from receiver.config.tracing import TracingSettings
from receiver.models import State
from receiver.providers import PROVIDERS
from receiver.providers.mapping import GenericSettings
from receiver.secret import Secret, resolve_secret
from receiver.signatures import check_hmac_secret, check_scheme
from receiver.signatures.base import parse_public_key

ENV_PREFIX = "JOBHOOK_"
DEFAULT_CONFIG = Path("jobhook.toml")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _to_secret(value: object, info: ValidationInfo) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string: a literal, 'env:NAME' or 'file:PATH'")
    env = info.context.get("env") if isinstance(info.context, dict) else None
    return Secret(resolve_secret(value, env))


SecretValue = Annotated[Secret, BeforeValidator(_to_secret)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)
    body_timeout_seconds: float = Field(10.0, gt=0)
    """A webhook body must arrive within this many seconds of its headers, else 408."""
    admin_token: SecretValue | None = None
    shutdown_grace_seconds: float = Field(10.0, ge=0)


class StoreSettings(_Section):
    url: str = ""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if url and not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return url


class ResultsSettings(_Section):
    dir: Path = Path()
    max_bytes: int = Field(2 * 1024**3, gt=0)
    allowed_hosts: tuple[str, ...] = ()
    allow_http: bool = False
    allow_private_networks: bool = False
    connect_timeout: float = Field(10.0, gt=0)
    read_timeout: float = Field(60.0, gt=0)
    max_attempts: int = Field(5, ge=1)


class PollSettings(_Section):
    enabled: bool = True
    grace_seconds: float = Field(120.0, ge=0)
    initial_delay: float = Field(2.0, gt=0)
    max_delay: float = Field(60.0, gt=0)
    requests_per_minute: float = Field(60.0, gt=0)
    give_up_after_hours: float = Field(30.0, gt=0)
    reconcile: bool = False
    reconcile_interval_seconds: float = Field(600.0, gt=0)

    def first_delay(self, pages: int | None) -> float:
        """The delay of a job's first poll: small documents are checked sooner, large ones later."""
        scale = 1.0 if pages is None else min(max(pages / 20.0, 0.25), 20.0)
        return min(self.initial_delay * scale, self.max_delay)

    def first_poll_at(self, pages: int | None, now: float) -> float:
        """When a job just heard of is polled first, unless news comes before."""
        return now + self.grace_seconds + self.first_delay(pages)


class SourceSettings(_Section):
    provider: str
    signature: str = "svix"
    public_keys: tuple[str, ...] = ()
    """``whpk_`` ed25519 keys for Standard Webhooks ``v1a`` signatures (svix only)."""
    secrets: tuple[SecretValue, ...] = Field((), validate_default=True)
    api_base_url: str | None = None
    api_key: SecretValue | None = None
    poll: PollSettings = PollSettings()
    generic: GenericSettings | None = None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, provider: str) -> str:
        if provider not in PROVIDERS:
            raise ValueError(
                f"unknown provider {provider!r}; known: {', '.join(sorted(PROVIDERS))}"
            )
        return provider

    @field_validator("signature")
    @classmethod
    def _known_scheme(cls, scheme: str, info: ValidationInfo) -> str:
        check_scheme(scheme, info.data.get("provider"))  # absent when it was refused
        return scheme

    @field_validator("public_keys")
    @classmethod
    def _valid_public_keys(cls, keys: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if keys and info.data.get("signature", "svix") != "svix":
            raise ValueError("public keys (v1a) are only for signature 'svix'")
        env = info.context.get("env") if isinstance(info.context, dict) else None
        resolved = tuple(resolve_secret(key, env) for key in keys)
        for index, key in enumerate(resolved):
            parse_public_key(key, index)
        return resolved

    @field_validator("secrets")
    @classmethod
    def _valid_secrets(
        cls, secrets: tuple[Secret, ...], info: ValidationInfo
    ) -> tuple[Secret, ...]:
        # public_keys is absent from info.data when it was refused: its own error suffices.
        if not secrets and not info.data.get("public_keys", ("refused",)):
            raise ValueError(
                "a signed source needs at least one secret (or, for svix, a whpk_ public key)"
            )
        # Each scheme has its own kind of secret; with a bad scheme its own error suffices.
        scheme = info.data.get("signature")
        for index, secret in enumerate(secrets):
            if scheme == "svix":
                check_svix_secret(secret.reveal(), index)
            elif scheme is not None:
                check_hmac_secret(secret.reveal(), index)
        return secrets

    @model_validator(mode="after")
    def _generic_table(self) -> SourceSettings:
        if self.provider == "generic" and self.generic is None:
            raise ValueError("provider 'generic' needs a [sources.NAME.generic] table")
        if self.provider != "generic" and self.generic is not None:
            raise ValueError(
                f"a generic table is only for provider 'generic', not {self.provider!r}"
            )
        return self


class HandlerSettings(_Section):
    model_config = ConfigDict(frozen=True, extra="allow")

    name: str
    type: str
    sources: tuple[str, ...] | None = None
    states: tuple[State, ...] | None = None
    max_attempts: int = Field(8, ge=1)
    backoff_initial: float = Field(1.0, gt=0)
    backoff_max: float = Field(300.0, gt=0)

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


class RetentionSettings(_Section):
    """``[retention]``: what is purged, and when; work not yet delivered never is."""

    # A purged delivery no longer dedupes a resend, so keep more than Svix's ~27.5 h of retries.
    max_age_days: float | None = Field(None, ge=2)
    delete_results_when_delivered: bool = False
    interval_seconds: float = Field(300.0, gt=0)


class LogSettings(_Section):
    level: str = "info"
    format: str = Field("auto", pattern="^(auto|json|console)$")


class Settings(_Section):
    """The whole configuration, read once at startup."""

    data_dir: Path = Path("data")
    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    results: ResultsSettings = ResultsSettings()
    dispatch: DispatchSettings = DispatchSettings()
    retention: RetentionSettings = RetentionSettings()
    log: LogSettings = LogSettings()
    tracing: TracingSettings | None = None
    """``[tracing]``: None when the table is absent (then only ``OTEL_*`` can turn it on)."""
    sources: dict[str, SourceSettings] = {}
    handlers: tuple[HandlerSettings, ...] = ()

    @model_validator(mode="after")
    def _derive_and_check(self) -> Settings:
        for name in self.sources:
            if not _NAME.match(name):
                raise ValueError(f"source name {name!r} must match {_NAME.pattern}")
        seen: set[str] = set()
        for handler in self.handlers:
            if handler.name in seen:
                raise ValueError(f"handler name {handler.name!r} is used twice")
            seen.add(handler.name)
            for source in handler.sources or ():
                if source not in self.sources:
                    raise ValueError(f"handler {handler.name!r} names unknown source {source!r}")
        # Paths left empty follow data_dir; frozen models are changed once, here.
        if not self.store.url:
            url = f"sqlite:///{self.data_dir / 'jobhook.db'}"
            object.__setattr__(self, "store", self.store.model_copy(update={"url": url}))
        if self.results.dir == Path():
            results = self.results.model_copy(update={"dir": self.data_dir / "results"})
            object.__setattr__(self, "results", results)
        return self


def check_svix_secret(value: str, index: int = 0) -> None:
    """A Svix / Standard Webhooks secret: ``whsec_`` + base64 of at least 16 bytes."""
    raw = value.removeprefix("whsec_")
    try:
        decoded = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"secret #{index} is not a whsec_ base64 secret") from None
    if len(decoded) < 16:
        raise ValueError(f"secret #{index} is too short ({len(decoded)} bytes, need 16)")
