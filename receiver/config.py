"""Settings: TOML (``--config`` / ``JOBHOOK_CONFIG``) plus ``JOBHOOK_*`` overrides, validated once.

Every secret may be a literal, ``env:NAME`` or ``file:PATH``. Errors name the key and the
problem and never the secret's value.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import string
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from receiver.errors import ConfigError
from receiver.models import State
from receiver.providers import PROVIDERS
from receiver.providers.pointer import Pointer
from receiver.secret import Secret, resolve_secret
from receiver.signatures import check_hmac_secret, check_scheme
from receiver.verify import parse_public_key

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


def _check_pointer(text: str) -> str:
    Pointer.parse(text)
    return text


JsonPointer = Annotated[str, AfterValidator(_check_pointer)]
_HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"


class GenericSettings(_Section):
    """``[sources.NAME.generic]``: how the generic provider reads any JSON API (RFC 6901)."""

    webhook_job_id: JsonPointer
    webhook_status: JsonPointer
    webhook_metadata: JsonPointer | None = None
    webhook_error: JsonPointer | None = None
    webhook_has_result: bool = False
    job_path: str = "/v1/jobs/{job_id}"
    job_status: JsonPointer
    result: JsonPointer | None = None
    result_url: JsonPointer | None = None
    result_sha256: JsonPointer | None = None
    error: JsonPointer | None = None
    progress_done: JsonPointer | None = None
    progress_total: JsonPointer | None = None
    retry_after: JsonPointer | None = None
    auth_header: str = Field("Authorization", pattern=_HEADER_NAME)
    auth_scheme: str = "Bearer"
    status_words: dict[str, State]

    @field_validator("job_path")
    @classmethod
    def _one_job_id_field(cls, path: str) -> str:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(path) if f is not None]
        except ValueError as exc:
            raise ValueError(f"is not a valid template: {exc}") from None
        if not path.startswith("/") or fields != ["job_id"]:
            raise ValueError("must start with '/' and contain '{job_id}' once, and no other field")
        return path

    @field_validator("status_words")
    @classmethod
    def _some_terminal_word(cls, words: dict[str, State]) -> dict[str, State]:
        if not any(state.terminal for state in words.values()):
            raise ValueError("needs at least one word for a terminal state, or no job ever ends")
        return words


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


def load_settings(path: Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Read, merge and validate the configuration; ConfigError names every bad key."""
    env = dict(os.environ) if environ is None else environ
    if path is None and env.get("JOBHOOK_CONFIG"):
        path = Path(env["JOBHOOK_CONFIG"])
    if path is None and DEFAULT_CONFIG.is_file():
        path = DEFAULT_CONFIG
    data: dict[str, Any] = _read_toml(path) if path is not None else _zero_config(env)
    _apply_env_overrides(data, env)
    try:
        return Settings.model_validate(data, context={"env": env})
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def _zero_config(env: dict[str, str]) -> dict[str, Any]:
    """No file: one Reducto source when REDUCTO_WEBHOOK_SECRET is set, else no source at all."""
    data_dir = env.get("JOBHOOK_DATA_DIR", "data")
    data: dict[str, Any] = {
        "handlers": [{"name": "files", "type": "file", "dir": f"{data_dir}/out"}],
    }
    if env.get("REDUCTO_WEBHOOK_SECRET"):
        source: dict[str, Any] = {
            "provider": "reducto",
            "secrets": ["env:REDUCTO_WEBHOOK_SECRET"],
        }
        if env.get("REDUCTO_API_KEY"):
            source["api_key"] = "env:REDUCTO_API_KEY"
            source["api_base_url"] = env.get("REDUCTO_API_BASE_URL", "https://platform.reducto.ai")
        data["sources"] = {"reducto": source}
    return data


def _apply_env_overrides(data: dict[str, Any], env: dict[str, str]) -> None:
    """``JOBHOOK_SERVER__PORT=9000`` sets ``server.port``; JSON values for lists and tables."""
    top = set(Settings.model_fields)
    for key in sorted(env):
        if not key.startswith(ENV_PREFIX):
            continue
        path = key[len(ENV_PREFIX) :].lower().split("__")
        if path[0] not in top or (len(path) == 1 and path[0] in {"server", "store", "results"}):
            continue
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{key}: {'.'.join(path[:-1])} is not a table")
            node = child
        node[path[-1]] = _env_value(env[key])


def _env_value(raw: str) -> Any:
    if raw[:1] in "[{":
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _describe(exc: ValidationError, path: Path | None) -> str:
    where = f"config {path}" if path is not None else "configuration"
    return "\n  ".join([f"invalid {where}:", *error_lines(exc)])


def error_lines(exc: ValidationError) -> list[str]:
    """Each problem as ``key.path: message``, never the value: how every settings error reads
    (the config's, and a built-in handler's options: ``handlers.base.HandlerOptions``)."""
    return [
        f"{'.'.join(str(p) for p in error['loc']) or '(top level)'}: "
        + error["msg"].removeprefix("Value error, ")
        for error in exc.errors(include_input=False, include_url=False)
    ]
