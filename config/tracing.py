"""The site's own tracing, beside the assistant's (assistant/tracing/): when OpenTelemetry's environment asks for
traces and its instrumentations are installed, every request Django handles is a span, and every query psycopg
sends is one inside it — a page, and the request a tool of the assistant makes through the site's middleware,
which then sits inside the tool's span with the queries its view ran."""

from __future__ import annotations

import importlib
import os

# OpenTelemetry's name for each instrumentation (the one OTEL_PYTHON_DISABLED_INSTRUMENTATIONS lists), and where
# its instrumentor is.
SITE_INSTRUMENTATIONS = {
    "django": ("opentelemetry.instrumentation.django", "DjangoInstrumentor"),
    "psycopg": ("opentelemetry.instrumentation.psycopg", "PsycopgInstrumentor"),
}


def instrument_site() -> list[str]:
    """Turn on each installed instrumentation the environment does not leave out, before Django loads its
    middleware. Returns the names of those on."""
    from assistant.tracing import tracing_enabled

    if not tracing_enabled():
        return []
    # OpenTelemetry's own variable for leaving one out, which `opentelemetry-instrument` honours too.
    disabled = {name.strip() for name in os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")}
    on = []
    for name, (module_name, class_name) in SITE_INSTRUMENTATIONS.items():
        if name in disabled:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # not installed: the assistant's spans are traced without this part of the site's
        instrumentor = getattr(module, class_name)()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
        on.append(name)
    return on
