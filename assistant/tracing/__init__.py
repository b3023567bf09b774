"""Traces of the assistant's work, for the operator's own tracing backend (OpenTelemetry, exported over OTLP).

Each run is an `invoke_agent` span (a member's run a child of its asker's), each model call a `chat` span and each
tool call an `execute_tool` span, named and labelled by the GenAI semantic conventions (conventions.py, the one
module that knows them). The trace goes from where a message was sent (the web request or socket, when the site
traces it) across the worker's queue, as a W3C `traceparent` kept in the run's config, into the tool's own request
through the site's middleware: whatever the site instruments itself (Django, psycopg) appears inside the tool's
span.

Tracing is on when OpenTelemetry's own environment says where to send traces (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), and neither `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none` says
otherwise; the packages are the `otel` extra. Off, nothing of OpenTelemetry is imported: every helper here is a
no-op costing a dictionary look-up. A site that set up OpenTelemetry itself (its own tracer provider) is used as
it is; otherwise one is made that exports over OTLP/HTTP as the `OTEL_*` variables say.

Prompts and replies are the person's data: they go on spans only with `ASSISTANT["TRACE_CONTENT"] = True`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

#: The instrumentation's name, as the spans' scope says it.
SCOPE = "django-assistant"


@lru_cache(maxsize=1)
def tracing_enabled() -> bool:
    """Whether OpenTelemetry's environment asks for traces, and its packages are installed."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return False
    try:
        import opentelemetry.sdk.trace  # noqa: F401
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: F401
    except ImportError:
        logger.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: install the "
                       "assistant's `otel` extra to export traces. No traces are sent.")
        return False
    return True


@lru_cache(maxsize=1)
def _tracer() -> Any:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # Nobody set one up: export as the OTEL_* variables say (endpoint, headers, batch delays, service name).
        provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get(
            "OTEL_SERVICE_NAME", "django-assistant")}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    return trace.get_tracer(SCOPE)


class Span:
    """What the code that opened a span may add to it; does nothing when tracing is off."""

    def __init__(self, real: Any = None) -> None:
        self._real = real

    def set(self, attributes: Mapping[str, Any]) -> None:
        if self._real is not None:
            self._real.set_attributes({key: value for key, value in attributes.items() if value is not None})

    def failed(self, error_type: str, description: str = "") -> None:
        """The operation ended in an error (`error.type`, and the span's status)."""
        if self._real is not None:
            from opentelemetry.trace import Status, StatusCode

            self._real.set_attribute("error.type", error_type)
            self._real.set_status(Status(StatusCode.ERROR, description[:500] or None))


_OFF = Span()


def _context_of(traceparent: str | None) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent}) if traceparent else None


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, parent: str | None = None,
         kind: str = "internal") -> Iterator[Span]:
    """A span named `name`, current while the block runs; a child of `parent` (a traceparent kept with a run)
    when given, else of whatever span is current. `kind`: internal, client or producer."""
    if not tracing_enabled():
        yield _OFF
        return
    from opentelemetry.trace import SpanKind

    kinds = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "producer": SpanKind.PRODUCER}
    with _tracer().start_as_current_span(name, context=_context_of(parent), kind=kinds[kind],
                                         record_exception=True) as real:
        handle = Span(real)
        handle.set(attributes or {})
        yield handle


def handoff(name: str, attributes: Mapping[str, Any] | None = None) -> str | None:
    """A run is handed to a worker: a short span for the hand-off, a child of the current span (the web request
    that sent a message, or the asking run), and its traceparent, for the run's own span to continue the trace
    from. None when tracing is off."""
    if not tracing_enabled():
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    with span(name, attributes, kind="producer"):
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        return carrier.get("traceparent")


def flush() -> None:
    """Send what is buffered now (a worker about to stop; a test that reads the receiver)."""
    if tracing_enabled():
        from opentelemetry import trace

        force = getattr(trace.get_tracer_provider(), "force_flush", None)
        if callable(force):
            force()
