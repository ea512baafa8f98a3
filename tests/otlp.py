"""A real OTLP/HTTP collector on loopback: ``POST /v1/traces``, decoded with opentelemetry-proto.

What the service exports is read as a collector reads it (protobuf ``ExportTraceServiceRequest``,
gzip or not), not taken from the SDK's in-memory exporter. ``tracing_config`` is the ``[tracing]``
table that points a service at it.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.requests import Request


@dataclass(frozen=True)
class CollectedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: str
    events: list[str] = field(default_factory=list)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Collector:
    """Keeps every span exported to it; ``wait_for`` polls until a condition holds."""

    def __init__(self) -> None:
        self.spans: list[CollectedSpan] = []
        self.requests = 0
        self.app = Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"])])

    async def traces(self, request: Request) -> Response:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )
        from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

        assert request.headers["content-type"] == "application/x-protobuf"
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        self.requests += 1
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        CollectedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=Span.SpanKind.Name(span.kind),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            status=Status.StatusCode.Name(span.status.code),
                            events=[event.name for event in span.events],
                        )
                    )
        return Response(
            ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf"
        )

    def named(self, prefix: str) -> list[CollectedSpan]:
        return [span for span in self.spans if span.name.startswith(prefix)]

    async def wait_for(
        self, done: Callable[[Collector], bool], timeout: float = 15.0
    ) -> list[CollectedSpan]:
        deadline = time.monotonic() + timeout
        while not done(self):
            if time.monotonic() > deadline:
                names = [(s.name, s.trace_id[:8]) for s in self.spans]
                raise AssertionError(f"the collector did not get there in {timeout}s: {names}")
            await asyncio.sleep(0.05)
        return self.spans


def tracing_config(endpoint: str, sampler: str = "always_on") -> str:
    """The ``[tracing]`` table exporting every span to ``endpoint``."""
    return f'\n[tracing]\nendpoint = "{endpoint}"\nsampler = "{sampler}"\n'
