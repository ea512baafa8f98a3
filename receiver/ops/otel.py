"""The OpenTelemetry SDK pieces: resource, sampler, OTLP exporter, batch processor.

Imported only once tracing is on (``receiver.ops.tracing.build``). ``[tracing]`` values win over
the ``OTEL_*`` variables; what the table leaves unset, the SDK reads from the environment itself
(``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER[_ARG]``, ``OTEL_EXPORTER_OTLP_*``,
``OTEL_BSP_*``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import ModuleType

    from receiver.config.tracing import TracingSettings

DEFAULT_SERVICE_NAME = "jobhook"
_GRPC = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
_HTTP = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


def provider(
    sdk_trace: ModuleType, settings: TracingSettings | None, environ: Mapping[str, str]
) -> Any:
    """A TracerProvider of its own (not the global one), exporting in batches."""
    kwargs: dict[str, Any] = {"resource": resource(settings, environ)}
    chosen = sampler(settings)
    if chosen is not None:
        kwargs["sampler"] = chosen
    tracer_provider = sdk_trace.TracerProvider(**kwargs)
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter(settings, environ)))
    return tracer_provider


def resource(settings: TracingSettings | None, environ: Mapping[str, str]) -> Resource:
    attributes: dict[str, Any] = dict(settings.resource_attributes) if settings else {}
    if settings is not None and settings.service_name:
        attributes[SERVICE_NAME] = settings.service_name
    created = Resource.create(attributes)
    if str(created.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        created = created.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return created


def sampler(settings: TracingSettings | None) -> sampling.Sampler | None:
    """The sampler ``[tracing]`` names, or None to let the SDK read ``OTEL_TRACES_SAMPLER``."""
    if settings is None or settings.sampler is None:
        return None
    ratio = 1.0 if settings.sampler_arg is None else settings.sampler_arg
    base, _, inner = settings.sampler.partition("parentbased_")
    name = inner or base
    root: sampling.Sampler = {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
    }.get(name) or sampling.TraceIdRatioBased(ratio)
    return sampling.ParentBased(root) if inner else root


def exporter(settings: TracingSettings | None, environ: Mapping[str, str]) -> Any:
    """OTLP over HTTP/protobuf; gRPC when asked and its exporter is installed; or the console."""
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        return ConsoleSpanExporter()
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    endpoint = settings.endpoint if settings is not None else None
    if protocol == "grpc":
        try:
            grpc = importlib.import_module(_GRPC)
        except ImportError as exc:
            raise ConfigError(
                "OTLP over gRPC needs its exporter: "
                "pip install opentelemetry-exporter-otlp-proto-grpc==1.45.2 "
                "(or use OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)"
            ) from exc
        return grpc.OTLPSpanExporter(endpoint=endpoint)
    if protocol != "http/protobuf":
        raise ConfigError(f"OTLP protocol {protocol!r} is not supported: use http/protobuf")
    http = importlib.import_module(_HTTP)
    if endpoint is not None:
        return http.OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    return http.OTLPSpanExporter()
