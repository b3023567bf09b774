"""The site's own tracing, beside the assistant's (assistant/tracing/): when OpenTelemetry's environment asks for
traces and its Django instrumentation is installed, every request Django handles is a span — a page, and the
request a tool of the assistant makes through the site's middleware, which then sits inside the tool's span."""

from __future__ import annotations


def instrument_site() -> None:
    import os

    from assistant.tracing import tracing_enabled

    disabled = {name.strip() for name in os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")}
    if not tracing_enabled() or "django" in disabled:  # OpenTelemetry's own variable for leaving one out
        return
    try:
        from opentelemetry.instrumentation.django import DjangoInstrumentor
    except ImportError:
        return  # the assistant's spans alone: the site's requests are not traced
    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
