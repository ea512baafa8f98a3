"""Spans as jobhook makes them: one global check, and nothing else, while tracing is off.

``receiver.ops.tracing`` installs a backend (OpenTelemetry's SDK) at startup when ``OTEL_*`` or
``[tracing]`` ask for it. Until then ``span()`` hands out one shared do-nothing span and no
opentelemetry module is imported. A trace crosses time and replicas as a W3C ``traceparent``
string: stored with a completion, read back by whichever replica dispatches it, and sent on in
every handler's output (``headers()``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping
    from contextlib import AbstractContextManager
    from types import TracebackType

Kind = Literal["internal", "server", "client", "producer", "consumer"]
Value = str | bool | int | float
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


class Span(Protocol):
    """What code does with a span it opened: add attributes, mark it failed."""

    def set(self, key: str, value: Value | None) -> None:
        """Set one attribute; None leaves it unset."""

    def fail(self, error: BaseException | str) -> None:
        """Mark the span failed (status ERROR, ``error.type``) without raising."""


class Backend(Protocol):
    """A tracer: ``receiver.ops.tracing.OtelBackend`` is the one that exports."""

    def span(
        self,
        name: str,
        kind: Kind,
        attributes: Mapping[str, Value | None],
        parent: str | None,
        start_ns: int | None,
    ) -> AbstractContextManager[Span]: ...

    def carrier(self) -> dict[str, str]:
        """The current context as ``traceparent`` (and ``tracestate``) headers; {} outside one."""
        ...

    def ids(self) -> tuple[str, str] | None:
        """The current span's (trace id, span id) in hex, or None outside a recorded span."""
        ...

    def annotate(self, attributes: Mapping[str, Value | None]) -> None:
        """Set attributes on the current span."""
        ...


class _NullSpan:
    """The span every ``span()`` returns while tracing is off: enters, exits, records nothing."""

    __slots__ = ()

    def set(self, key: str, value: Value | None) -> None:
        pass

    def fail(self, error: BaseException | str) -> None:
        pass

    def __enter__(self) -> _NullSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


NULL_SPAN = _NullSpan()
_EMPTY: Mapping[str, Value | None] = {}
_backend: Backend | None = None


def install(backend: Backend | None) -> None:
    """Make ``backend`` the tracer of the process (None: tracing off again)."""
    global _backend
    _backend = backend


def enabled() -> bool:
    return _backend is not None


def span(
    name: str,
    *,
    kind: Kind = "internal",
    parent: str | None = None,
    attributes: Mapping[str, Value | None] | None = None,
    start_ns: int | None = None,
) -> AbstractContextManager[Span]:
    """A span around a block, child of the current one, or of ``parent`` (a traceparent) when
    given; the shared no-op span while tracing is off."""
    if _backend is None:
        return NULL_SPAN
    return _backend.span(name, kind, attributes or _EMPTY, parent, start_ns)


def annotate(attributes: Mapping[str, Value | None]) -> None:
    """Set attributes on the current span, if any (e.g. what a download counted)."""
    if _backend is not None:
        _backend.annotate(attributes)


def headers() -> dict[str, str]:
    """``traceparent``/``tracestate`` for the current span, to send downstream; {} when off."""
    return {} if _backend is None else _backend.carrier()


def traceparent() -> str | None:
    """The current span's W3C traceparent, or None (tracing off, or outside a span)."""
    return None if _backend is None else _backend.carrier().get("traceparent")


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span in hex, for log lines; None outside one."""
    return None if _backend is None else _backend.ids()


def trace_id(traceparent: str | None) -> str | None:
    """The trace id a stored traceparent names (32 hex digits), or None when there is none."""
    if not traceparent:
        return None
    match = _TRACEPARENT.match(traceparent)
    return match.group(1) if match else None
