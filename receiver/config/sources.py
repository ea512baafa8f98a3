"""``[sources.NAME]``: a provider, how its webhooks are signed, its job API and poll budget."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from receiver.config.base import VARIABLE_NAME, SecretValue, _Section
from receiver.config.direct import check_direct
from receiver.errors import ProviderLoadError
from receiver.providers import ENTRY_POINT_GROUP, PROVIDERS, Provider, provider_class
from receiver.secret import Secret, resolve_secret
from receiver.signatures import SCHEMES, check_hmac_secret, known_schemes
from receiver.signatures.base import parse_public_key
from receiver.signatures.svix import check_svix_secret

if TYPE_CHECKING:
    from pydantic_core import InitErrorDetails

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_CONFIDENCE_FIELDS = 100


class PollSettings(_Section):
    enabled: bool = True
    grace_seconds: float = Field(120.0, ge=0)
    initial_delay: float = Field(2.0, gt=0)
    max_delay: float = Field(60.0, gt=0)
    # Unset: the provider's default (receiver.providers.ratelimit), then what the server says;
    # set: a ceiling the learned budget never exceeds.
    requests_per_minute: float | None = Field(None, gt=0)
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
    """A built-in provider's name, an entry point in ``jobhook.providers``, or
    ``"package.module:attr"`` naming a ``Provider`` subclass (see Write a provider)."""
    signature: str = "svix"
    webhook_mode: Literal["svix", "direct"] = "svix"
    """``direct`` (a provider that sends unsigned callbacks: Reducto's direct webhooks, Docling
    Serve, LlamaParse without a signing secret) takes them at ``/webhooks/NAME/TOKEN``, or at
    ``/webhooks/NAME`` with ``direct_header``, as hints that send jobhook to the job API (see
    Security); ``svix`` (the default) verifies signed webhooks with ``signature``'s scheme."""
    public_keys: tuple[str, ...] = ()
    """``whpk_`` ed25519 keys for Standard Webhooks ``v1a`` signatures (svix only)."""
    secrets: tuple[SecretValue, ...] = Field((), validate_default=True)
    api_base_url: str | None = None
    api_key: SecretValue | None = None
    poll: PollSettings = PollSettings()
    api_version: str | None = None
    """The API spoken, for a provider with several (Knowhere: ``v2``, as its SDK does, by
    default; ``v1``): one of the provider's ``api_versions``."""
    direct_tokens: tuple[SecretValue, ...] = ()
    """``webhook_mode = "direct"``: the secret path tokens of the webhook URL (at least 128 bits
    each, as ``secrets.token_urlsafe(32)`` makes them; several during a rotation)."""
    direct_header: str | None = None
    """``webhook_mode = "direct"``: a header the callbacks carry (set where the provider lets
    the caller choose headers), holding one of ``direct_header_values``."""
    direct_header_values: tuple[SecretValue, ...] = ()
    """The secret values ``direct_header`` may hold (at least 128 bits each; several during a
    rotation)."""
    direct_unknown_per_minute: int = Field(30, ge=0)
    """``webhook_mode = "direct"``: hints about jobs jobhook does not track that are looked up
    a minute at most; more are refused with 429, so a flood cannot spend the API's budget."""
    confidence_alert: float = 0.80
    """A field's confidence under this counts as weak (``below`` in ``/jobs/stats``)."""
    confidence_fields: tuple[str, ...] = ()
    """The fields the ``jobhook_field_confidence`` histogram names (others are ``other``);
    empty: the first ``METRIC_FIELDS`` distinct fields seen."""
    table: SerializeAsAny[BaseModel] | None = Field(None, exclude=True, repr=False)
    """The provider's own sub-table, ``[sources.NAME.<table_name>]``, validated by the model the
    provider declares (``table_model``) and handed to its adapter; not a key of its own."""

    @classmethod
    def sub_table(cls, key: str) -> type[BaseModel] | None:
        """The model of the table named ``key`` of a built-in or entry-point provider (what
        problems.py walks to suggest a key)."""
        names = [*PROVIDERS, *(p.name for p in entry_points(group=ENTRY_POINT_GROUP))]
        for name in names:
            provider = _found(name)
            if provider is not None and provider.table_name == key:
                return provider.table_model
        return None

    @model_validator(mode="before")
    @classmethod
    def _provider_table(cls, data: Any, info: ValidationInfo) -> Any:
        # The provider's sub-table is read with its own model, so a plugin's table is checked
        # as a built-in's is; its errors keep the key's path ([sources.NAME.TABLE] key).
        if not isinstance(data, dict):
            return data
        if "table" in data:
            raise _under(
                cls.__name__, "table", [{"type": "extra_forbidden", "loc": (), "input": None}]
            )
        found = _found(data.get("provider"))
        if found is None:
            return data  # the provider check says why
        name, model = found.table_name, found.table_model
        if name in cls.model_fields:
            raise ValueError(f"provider {found.name!r} names its table {name!r}, a source's key")
        data = dict(data)
        if name is not None and model is not None and name in data:
            try:
                data["table"] = model.model_validate(data.pop(name), context=info.context)
            except ValidationError as exc:
                raise _under(exc.title, name, exc.errors()) from None
        owners = {p.table_name: p.name for p in PROVIDERS.values() if p.table_name}
        for key in data:
            if key in owners and key != name:
                article = "an" if key[0] in "aeiou" else "a"
                raise ValueError(
                    f"{article} {key} table is only for provider {owners[key]!r}, "
                    f"not for provider {found.name!r}"
                )
        return data

    @model_validator(mode="before")
    @classmethod
    def _unannounced(cls, data: Any) -> Any:
        # A provider that sends no webhook has nothing to wait for: its jobs are polled from
        # the start unless grace_seconds says otherwise.
        found = _found(data.get("provider")) if isinstance(data, dict) else None
        if found is None or found.webhooks:
            return data
        poll = data.get("poll", {})
        if isinstance(poll, dict) and "grace_seconds" not in poll:
            data = {**data, "poll": {**poll, "grace_seconds": 0.0}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_signature(cls, data: object) -> object:
        # A provider that announces jobs one way only (SNS) declares that scheme its default.
        found = _found(data.get("provider")) if isinstance(data, dict) else None
        if isinstance(data, dict) and found is not None and "signature" not in data:
            data = {**data, "signature": found.default_signature}
        return data

    @field_validator("confidence_alert")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:  # also refuses nan
            raise ValueError("must be a number from 0 to 1 (0.8 means 80 % confident)")
        return value

    @field_validator("confidence_fields")
    @classmethod
    def _field_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if len(names) > MAX_CONFIDENCE_FIELDS:
            raise ValueError(f"name at most {MAX_CONFIDENCE_FIELDS} fields")
        if any(not name or len(name) > 200 or not name.isprintable() for name in names):
            raise ValueError("each field name must be printable text of 1 to 200 characters")
        return names

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, provider: str) -> str:
        # A built-in name, an entry point in jobhook.providers, or "package.module:attr".
        try:
            provider_class(provider)
        except ProviderLoadError as exc:
            raise ValueError(str(exc)) from None
        return provider

    @field_validator("api_version")
    @classmethod
    def _spoken_version(cls, version: str | None, info: ValidationInfo) -> str | None:
        found = _found(info.data.get("provider"))
        if version is None or found is None or version in found.api_versions:
            return version
        if found.api_versions:
            raise ValueError(
                f"provider {found.name!r} speaks api_version {' or '.join(found.api_versions)}"
            )
        takers = [repr(n) for n, p in PROVIDERS.items() if p.api_versions]
        raise ValueError(f"api_version is for provider {' or '.join(takers)}, not {found.name!r}")

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
        for index, key in enumerate(keys, start=1):
            if VARIABLE_NAME.fullmatch(key.strip()):
                raise ValueError(
                    f"public key #{index}: {key.strip()} is an environment variable's name; did "
                    f"you mean 'env:{key.strip()}'?"
                )
        resolved = tuple(resolve_secret(key, env) for key in keys)
        for index, key in enumerate(resolved, start=1):
            parse_public_key(key, index)
        return resolved

    @field_validator("secrets")
    @classmethod
    def _valid_secrets(
        cls, secrets: tuple[Secret, ...], info: ValidationInfo
    ) -> tuple[Secret, ...]:
        # public_keys is absent from info.data when it was refused: its own error suffices.
        scheme = info.data.get("signature")
        if scheme in SCHEMES and SCHEMES[scheme] is None:
            # A scheme built from the provider's table (SNS: its topics), not from secrets.
            table = _found(info.data.get("provider"))
            where = f"[sources.NAME.{table.table_name}]" if table and table.table_name else "own"
            if secrets:
                raise ValueError(
                    f"signature {scheme!r} takes no secrets: it verifies with what the "
                    f"provider's {where} table lists (for SNS: the topics, topic_arns)"
                )
            return secrets
        provider = _found(info.data.get("provider"))
        if provider is not None and not provider.webhooks:
            if secrets:
                raise ValueError(
                    f"provider {provider.name!r} sends no webhooks: it needs no secrets"
                )
            return secrets
        unsigned = provider is not None and provider.unsigned_only
        direct = info.data.get("webhook_mode") == "direct" or unsigned
        if not secrets and not direct and not info.data.get("public_keys", ("refused",)):
            raise ValueError(
                "a signed source needs at least one secret (or, for svix, a whpk_ public key); "
                'add secrets = ["env:NAME"] naming the provider\'s signing secret'
            )
        # Each scheme has its own kind of secret; with a bad scheme its own error suffices.
        for index, secret in enumerate(secrets, start=1):
            if scheme == "svix":
                check_svix_secret(secret.reveal(), index)
            elif scheme is not None:
                check_hmac_secret(secret.reveal(), index)
        return secrets

    @model_validator(mode="after")
    def _provider_rules(self) -> SourceSettings:
        found = provider_class(self.provider)  # the field check found it
        found.check_source({key: getattr(self, key) for key in type(self).model_fields}, self.table)
        if found.job_auth != "api_key" and self.api_key is not None:
            signer = (
                f"[sources.NAME.{found.table_name}] credentials"
                if found.job_auth == "table" and found.table_name
                else "its own credentials"
                if found.job_auth == "table"
                else "AWS Signature V4 (the environment's key pair)"
            )
            raise ValueError(
                f"provider {self.provider!r} signs its requests with {signer}, not an api_key"
            )
        # A source whose table signs in by itself (its ``signs_in``) holds no key.
        keyless = bool(getattr(self.table, "signs_in", False))
        if not found.webhooks and found.job_auth == "api_key" and not (self.api_key or keyless):
            raise ValueError(
                f"provider {self.provider!r} is polled: it needs api_key (its API key)"
            )
        if found.unsigned_only and self.webhook_mode != "direct":
            raise ValueError(
                f"provider {self.provider!r} sends unsigned callbacks only: set "
                'webhook_mode = "direct" with direct_tokens or direct_header (see Security)'
            )
        if self.webhook_mode == "direct":
            check_direct(
                self.provider,
                self.api_base_url,
                self.api_key,
                self.direct_tokens,
                hint_providers=_hint_providers(self.provider, found),
                header=self.direct_header,
                header_values=self.direct_header_values,
            )
        elif self.direct_tokens or self.direct_header or self.direct_header_values:
            raise ValueError("direct_tokens and direct_header need webhook_mode = 'direct'")
        return self


def check_scheme(scheme: str, provider: str | None) -> None:
    """ValueError unless ``scheme`` exists and ``provider`` (when known) accepts it: svix is
    open to every provider, any other scheme to the providers that declare it."""
    found = _found(provider)
    own = found.verifiers if found is not None else {}
    known = known_schemes(own)
    if scheme not in known:
        raise ValueError(f"unknown signature scheme {scheme!r}; known: {', '.join(known)}")
    if found is None or scheme == "svix" or scheme in found.signature_schemes:
        return
    takers = [name for name, cls in PROVIDERS.items() if scheme in cls.signature_schemes]
    if not takers:
        raise ValueError(f"signature {scheme!r} is not one provider {provider!r} accepts")
    raise ValueError(
        f"signature {scheme!r} is only for provider {' or '.join(takers)}, not {provider!r}"
    )


def _under(title: str, table: str, errors: list[Any]) -> ValidationError:
    """``errors`` of a provider's table, each at its key's path under ``table``."""
    moved: list[InitErrorDetails] = []
    for error in errors:
        detail: InitErrorDetails = {
            "type": error["type"],
            "loc": (table, *error["loc"]),
            "input": error["input"],
        }
        if "ctx" in error:
            detail["ctx"] = error["ctx"]
        try:  # a table's own error type (PydanticCustomError) is not one pydantic-core knows
            ValidationError.from_exception_data(title, [detail])
        except KeyError:
            detail = {**detail, "type": PydanticCustomError(error["type"], error["msg"])}
            detail.pop("ctx", None)
        moved.append(detail)
    return ValidationError.from_exception_data(title, moved)


def _found(name: object) -> type[Provider] | None:
    """The provider class ``name`` loads, or None where the provider check says why not."""
    if not isinstance(name, str):
        return None
    try:
        return provider_class(name)
    except ProviderLoadError:
        return None


def _hint_providers(name: str, found: type[Provider]) -> list[str]:
    """The providers whose unsigned callbacks may be hints: the built-in ones that name a job
    in them, and ``name`` (a third-party provider too) when its class does."""
    names = [builtin for builtin, cls in PROVIDERS.items() if cls.hint_job_field]
    if found.hint_job_field and name not in names:
        names.append(name)
    return names
