"""System checks for the assistant's infrastructure, with stable ids (assistant.E0xx / W0xx)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import connections


@register(Tags.database)
def check_pgvector_available(app_configs: Any, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Memory needs the pgvector extension; it must at least be installable on the server."""
    errors: list[CheckMessage] = []
    for alias in databases or []:
        connection = connections[alias]
        if connection.vendor != "postgresql":
            errors.append(
                Error(
                    f"Database '{alias}' is {connection.vendor}; the assistant needs PostgreSQL with pgvector.",
                    hint="Point DATABASE_URL at PostgreSQL, or unset it to use the embedded server.",
                    id="assistant.E001",
                )
            )
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            if cursor.fetchone() is None:
                errors.append(
                    Error(
                        f"The pgvector extension is not available on database '{alias}'.",
                        hint="Install pgvector on the server (e.g. the postgresql-16-pgvector package) "
                        "or use a managed PostgreSQL that offers it.",
                        id="assistant.E001",
                    )
                )
    return errors


@register()
def check_channel_layer(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """An in-memory layer cannot carry events from a Celery worker to daphne: live steps would vanish."""
    backend = str(settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", ""))
    if not settings.DEBUG and backend.endswith("InMemoryChannelLayer"):
        return [
            Error(
                "The in-memory channel layer is configured outside DEBUG.",
                hint="Use channels_redis.core.RedisChannelLayer (or the Pub/Sub layer) with REDIS_URL.",
                id="assistant.E002",
            )
        ]
    return []


@register()
def check_redis_reachable(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The broker, the channel layer and the failover breaker all live in Redis."""
    from assistant.health import redis_status

    status = redis_status()
    if not status["ok"]:
        return [
            Error(
                f"Redis at REDIS_URL is not reachable: {status['error']}",
                hint="Start Redis (or `make run`, which starts an embedded one) or fix REDIS_URL.",
                id="assistant.E003",
            )
        ]
    return []


@register()
def check_model_and_embedder(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """A misspelt ASSISTANT_MODEL or ASSISTANT_EMBEDDER is reported at start-up, not at the first message.
    Building either makes no network call."""
    from assistant.conf import assistant_settings
    from assistant.embeddings import EmbeddingError, get_embedder
    from assistant.llm import ModelError, get_model

    errors: list[CheckMessage] = []
    try:
        get_model()
    except ModelError as exc:
        errors.append(Error(f"ASSISTANT_MODEL={assistant_settings.MODEL!r} cannot be used: {exc}",
                            hint="Use offline, scripted:PATH, openai:MODEL, anthropic:MODEL, or a comma-separated "
                                 "chain of them.", id="assistant.E004"))
    try:
        get_embedder()
    except EmbeddingError as exc:
        errors.append(Error(f"ASSISTANT_EMBEDDER={assistant_settings.EMBEDDER!r} cannot be used: {exc}",
                            hint="Use local or openai:MODEL.", id="assistant.E005"))
    return errors
