"""OpenTelemetry behind ``receiver.tracing``: built at startup only when tracing is asked for.

``requested`` reads ``[tracing]`` and the ``OTEL_*`` variables without importing anything;
``build`` imports the SDK (or fails with the install command), and makes a tracer provider of
its own (the global one is left to the embedding program) exporting OTLP/HTTP protobuf in
batches. The lifespan installs the backend into ``receiver.tracing`` and shuts it down last.
"""

from __future__ import annotations

import importlib
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from receiver import tracing
from receiver.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from contextlib import AbstractContextManager
    from types import TracebackType

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
    """``receiver.tracing.Backend`` over an SDK tracer provider.

    The current span is jobhook's own context variable (``_Scope``), not OpenTelemetry's
    context: every span jobhook makes goes through here, so a child names its parent to the SDK
    directly, and the log processor and handlers read ids and the traceparent off the scope,
    formatted once. ``start_as_current_span``'s generator context managers and context lookups
    were most of a span's cost on the webhook path. A child of a span that is not sampled is
    not made at all (every sampler ``[tracing]`` offers decides the same for a whole trace), so
    an unsampled webhook costs one span, not three.
    """

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace

        self.provider = provider
        self._trace = trace
        self._tracer = provider.get_tracer("jobhook")
        self._kinds = {kind.name.lower(): kind for kind in trace.SpanKind}
        self._error = trace.StatusCode.ERROR
        self._flags = trace.TraceFlags
        self._span_context = trace.SpanContext

    def span(
        self,
        name: str,
        kind: Kind,
        attributes: Mapping[str, Value | None],
        parent: str | None,
        start_ns: int | None,
    ) -> AbstractContextManager[Span]:
        if parent is not None:
            context = self._extract(parent)
        else:
            current = _SCOPE.get()
            if current is None:
                context = None
            elif not current.recording:
                return tracing.NULL_SPAN  # the trace is not sampled: neither is this child
            else:
                context = current.as_parent()
        otel_span = self._tracer.start_span(
            name,
            context=context,
            kind=self._kinds[kind],
            attributes={k: v for k, v in attributes.items() if v is not None},
            start_time=start_ns,
            record_exception=False,
            set_status_on_exception=False,
        )
        return _Scope(otel_span, self)

    def _extract(self, traceparent: str) -> Any:
        parts = traceparent.split("-")
        try:
            trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
        except (IndexError, ValueError):
            return None  # not a traceparent: start a new trace
        remote = self._span_context(
            trace_id, span_id, is_remote=True, trace_flags=self._flags(flags & 0x01)
        )
        if not remote.is_valid:
            return None
        return self._trace.set_span_in_context(self._trace.NonRecordingSpan(remote))

    def carrier(self) -> dict[str, str]:
        scope = _SCOPE.get()
        return {} if scope is None else scope.carrier()

    def ids(self) -> tuple[str, str] | None:
        scope = _SCOPE.get()
        return None if scope is None else scope.ids()

    def annotate(self, attributes: Mapping[str, Value | None]) -> None:
        scope = _SCOPE.get()
        if scope is not None:
            for key, value in attributes.items():
                scope.set(key, value)

    def shutdown(self) -> None:
        """Export what is pending and stop (the lifespan's last step)."""
        self.provider.shutdown()


class _Scope:
    """A started span, current (``_SCOPE``) while the block runs, ended when it leaves."""

    __slots__ = ("_backend", "_carrier", "_ids", "_parent", "_span", "_token", "recording")

    def __init__(self, span: Any, backend: OtelBackend) -> None:
        self._span = span
        self._backend = backend
        self._token: Any = None
        self._parent: Any = None
        self._ids: tuple[str, str] | None = None
        self._carrier: dict[str, str] | None = None
        self.recording: bool = span.is_recording()

    def __enter__(self) -> _Scope:
        self._token = _SCOPE.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A rejection (4xx) is the caller's error, not the span's (HTTP conventions).
        if exc is not None and self.recording and getattr(exc, "status_code", 500) >= 500:
            self._span.record_exception(exc)
            self.fail(exc)
        _SCOPE.reset(self._token)
        self._span.end()

    def as_parent(self) -> Any:
        """The OpenTelemetry context whose current span is this one (for a child's start)."""
        if self._parent is None:
            self._parent = self._backend._trace.set_span_in_context(self._span)
        return self._parent

    def ids(self) -> tuple[str, str]:
        if self._ids is None:
            context = self._span.get_span_context()
            self._ids = f"{context.trace_id:032x}", f"{context.span_id:016x}"
        return self._ids

    def carrier(self) -> dict[str, str]:
        if self._carrier is None:
            context = self._span.get_span_context()
            trace_id, span_id = self.ids()
            self._carrier = {"traceparent": f"00-{trace_id}-{span_id}-{context.trace_flags:02x}"}
            if context.trace_state:
                self._carrier["tracestate"] = context.trace_state.to_header()
        return dict(self._carrier)

    def set(self, key: str, value: Value | None) -> None:
        if value is not None and self.recording:
            self._span.set_attribute(key, value)

    def fail(self, error: BaseException | str) -> None:
        if not self.recording:
            return
        kind = type(error).__name__ if isinstance(error, BaseException) else "error"
        self._span.set_attribute("error.type", kind)
        self._span.set_status(self._backend._trace.Status(self._backend._error, str(error)[:500]))


_SCOPE: ContextVar[_Scope | None] = ContextVar("jobhook_span", default=None)
