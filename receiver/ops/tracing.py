"""OpenTelemetry behind ``receiver.tracing``: built at startup only when tracing is asked for.

``requested`` reads ``[tracing]`` and the ``OTEL_*`` variables without importing anything;
``build`` imports the SDK (or fails with the install command), and makes a tracer provider of
its own (the global one is left to the embedding program) exporting OTLP/HTTP protobuf in
batches. The lifespan installs the backend into ``receiver.tracing`` and shuts it down last.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING, Any

from receiver.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from receiver.config.tracing import TracingSettings
    from receiver.tracing import Kind, Span, Value

INSTALL_HINT = "pip install 'jobhook[otel]' (or: uv sync --extra otel)"
_SWITCHES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def requested(settings: TracingSettings | None, environ: Mapping[str, str]) -> bool:
    """Whether tracing is on: ``[tracing]`` (unless ``enabled = false``), else an OTLP endpoint
    or ``OTEL_TRACES_EXPORTER`` in the environment; ``OTEL_SDK_DISABLED=true`` always wins."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if settings is not None:
        return settings.enabled
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter) or any(environ.get(name, "").strip() for name in _SWITCHES)


def build(settings: TracingSettings | None, environ: Mapping[str, str]) -> OtelBackend | None:
    """The backend tracing asks for, or None when it is off; ConfigError names what is missing."""
    if not requested(settings, environ):
        return None
    try:
        sdk_trace = importlib.import_module("opentelemetry.sdk.trace")
    except ImportError as exc:
        raise ConfigError(
            "tracing is on ([tracing] or OTEL_*) but OpenTelemetry is not installed: "
            + INSTALL_HINT
        ) from exc
    from receiver.ops import otel

    return OtelBackend(otel.provider(sdk_trace, settings, environ))


class OtelBackend:
    """``receiver.tracing.Backend`` over an SDK tracer provider."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.provider = provider
        self._trace = trace
        self._tracer = provider.get_tracer("jobhook")
        self._propagator = TraceContextTextMapPropagator()
        self._kinds = {kind.name.lower(): kind for kind in trace.SpanKind}

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        kind: Kind,
        attributes: Mapping[str, Value | None],
        parent: str | None,
        start_ns: int | None,
    ) -> Iterator[Span]:
        context = self._propagator.extract({"traceparent": parent}) if parent else None
        with self._tracer.start_as_current_span(
            name,
            context=context,
            kind=self._kinds[kind],
            attributes={k: v for k, v in attributes.items() if v is not None},
            start_time=start_ns,
            record_exception=False,
            set_status_on_exception=False,
        ) as otel_span:
            wrapped = _OtelSpan(otel_span, self._trace)
            try:
                yield wrapped
            except BaseException as exc:
                # A rejection (4xx) is the caller's error, not the span's (HTTP conventions).
                if getattr(exc, "status_code", 500) >= 500:
                    otel_span.record_exception(exc)
                    wrapped.fail(exc)
                raise

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        return carrier

    def ids(self) -> tuple[str, str] | None:
        context = self._trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"{context.trace_id:032x}", f"{context.span_id:016x}"

    def annotate(self, attributes: Mapping[str, Value | None]) -> None:
        current = self._trace.get_current_span()
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(key, value)

    def shutdown(self) -> None:
        """Export what is pending and stop (the lifespan's last step)."""
        self.provider.shutdown()


class _OtelSpan:
    __slots__ = ("_span", "_trace")

    def __init__(self, span: Any, trace: Any) -> None:
        self._span = span
        self._trace = trace

    def set(self, key: str, value: Value | None) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def fail(self, error: BaseException | str) -> None:
        kind = type(error).__name__ if isinstance(error, BaseException) else "error"
        self._span.set_attribute("error.type", kind)
        self._span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)[:500]))
