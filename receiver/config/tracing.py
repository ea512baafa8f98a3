"""``[tracing]``: where OpenTelemetry spans go; what it leaves unset the ``OTEL_*`` variables say.

The table's presence asks for tracing (``enabled = false`` keeps it off whatever the environment
says); without it, ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``, or
``OTEL_TRACES_EXPORTER``) does. Either way the ``otel`` extra must be installed.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


class TracingSettings(BaseModel):
    """``[tracing]``; every field left unset falls back to its ``OTEL_*`` variable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    endpoint: str | None = Field(None, pattern=r"^https?://[^\s?#]+$")
    """The collector's OTLP/HTTP base URL (``/v1/traces`` is added), as
    ``OTEL_EXPORTER_OTLP_ENDPOINT``: e.g. ``http://otel-collector:4318``."""
    service_name: str | None = None
    """``service.name`` (``OTEL_SERVICE_NAME``); ``jobhook`` when neither says."""
    sampler: str | None = Field(None, pattern="^(" + "|".join(SAMPLERS) + ")$")
    """As ``OTEL_TRACES_SAMPLER``; the SDK's default is ``parentbased_always_on``."""
    sampler_arg: float | None = Field(None, ge=0.0, le=1.0)
    """The ratio of the ``*traceidratio`` samplers (``OTEL_TRACES_SAMPLER_ARG``)."""
    resource_attributes: dict[str, str] = {}
    """Added to ``OTEL_RESOURCE_ATTRIBUTES``' (``deployment.environment.name`` and the like)."""
