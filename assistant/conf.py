"""The assistant's settings: one `ASSISTANT = {...}` dict in Django settings, read through `assistant_settings`.

An optional sub-app reads its own keys from the same dict, with defaults of its own (`AppSettings`, e.g.
assistant/mcp/conf.py), and names them in its AppConfig's `assistant_setting_defaults`, so that they are known
where it is installed. Unknown keys are rejected so a typo never silently falls back to a default. Values are
re-read when tests use `override_settings(ASSISTANT=...)`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

if TYPE_CHECKING:
    from django.core.checks import CheckMessage

DEFAULTS: dict[str, Any] = {
    # Redis for the assistant's own keys (the failover breaker, cancel flags, the sweeper's heartbeat).
    # None: the Redis the project already uses, see `assistant_redis_url()`.
    "REDIS_URL": None,
    # Model chain (comma-separated = failover) and embedder; see the assistant's docs/models.md.
    "MODEL": "offline",
    "EMBEDDER": "local",
    "SPEC": "default",
    "PERMISSION_PROFILE": "standard",
    "INSTRUCTIONS": (
        "You are the assistant inside this web application. You act as the signed-in user through "
        "the tools you are given, and only through them. Be brief; say what you did."
    ),
    # Loop limits, per run.
    "MAX_MODEL_CALLS": 8,
    "MAX_TOOL_CALLS": 20,
    "MAX_WALL_SECONDS": 120,
    "MAX_TOKENS_PER_RUN": 50_000,
    "MAX_IDENTICAL_TOOL_CALLS": 3,
    # Context and memory.
    "KEEP_MESSAGES": 20,
    "RECALL_LIMIT": 5,
    # Abuse limits.
    "RUNS_PER_MINUTE": 20,
    "MAX_MESSAGE_CHARS": 8_000,
    "MAX_FRAME_BYTES": 64_000,
    # How often an open socket re-checks that its session is still live (signed in, active, unchanged
    # password); a socket whose session ended closes with 4401. Logging out closes it at once.
    "SESSION_CHECK_SECONDS": 3.0,
    # Reads.
    "READ_LIMIT_MAX": 50,
    # The /assistant/ page: None = a page of its own; {"template": "base.html", "block": "content"} = the
    # content of that block of the host's layout.
    "PAGE_LAYOUT": None,
    # Tools: a string argument with no declared maximum (e.g. a text area) is capped at this length.
    "MAX_ARGUMENT_CHARS": 10_000,
    # Files the person attaches to a message (assistant/attachments/): the largest accepted, in bytes; the types
    # accepted (as their content says, whatever their name claims); how many one message carries; and how much of
    # a text file's content the model reads.
    "ATTACHMENT_MAX_BYTES": 10 * 1024 * 1024,
    "ATTACHMENT_TYPES": [
        "text/plain", "text/csv", "text/markdown", "text/html", "application/json", "application/pdf",
        "image/png", "image/jpeg", "image/gif", "image/webp",
    ],
    "ATTACHMENTS_PER_MESSAGE": 5,
    "ATTACHMENT_TEXT_CHARS": 20_000,
    # Named specs: which tools each may use ("__all__" or a list of names) and its permission profile
    # (restricted / standard / trusted), and as members of a society its role, instructions, model, limits
    # and delegates (assistant/society/members.py). A spec not listed here, if it is SPEC, sees every tool.
    "SPECS": {},
    # How deep a tree of runs may grow: a top run (depth 0) may hand work to members, they to theirs, … to
    # this depth; no spec twice on one path.
    "MAX_DELEGATION_DEPTH": 3,
    # Offer every run the planning tool (assistant/plans/): for a request of several actions, the model
    # says its plan first, and the person watches it followed step by step.
    "PLANS": True,
    # When a plan waits for the person's Approve/Deny before anything of it is done, for a spec that does
    # not say (its `plan_approval`): "never", "when_destructive" (a plan with a destructive step) or "always".
    # An approved plan's destructive steps still each ask first, as any destructive call does.
    "PLAN_APPROVAL": "when_destructive",
    # What a run that read text written by anyone but the person does before an effect, for a spec that does
    # not say (its `containment`): "approve" (each write waits for the person's approval, showing what it
    # will write), "refuse" (writes are refused) or "allow" (for a spec that never meets other people's
    # text). A destructive call asks whatever this says (assistant/tools/provenance.py).
    "CONTAINMENT": "approve",
    # Whether a member's answer may be the reply, for a spec that does not say (its `handoff`): "auto" (a
    # member asked alone answers the person itself, streamed as it writes, and the asking run makes no
    # further model call, unless its model asks for the answer back) or "never" (every answer comes back to
    # the asking model as data, which then writes the reply). See docs/specs.md, "Handoff".
    "HANDOFF": "auto",
    # Whether a request that plainly belongs to one member is handed to it without asking the asking spec's
    # model first, for a spec that does not say (its `routing`): "auto" or "never" (assistant/society/routing.py).
    "ROUTING": "auto",
    # Providers.
    "REQUEST_TIMEOUT_SECONDS": 60.0,
    "MAX_OUTPUT_TOKENS": 1024,
    # What models cost, per million tokens (assistant/llm/prices.py): {"openai:gpt-4.1-mini": {"input": "0.40",
    # "cached_input": "0.10", "output": "1.60"}}; none by default. The currency the prices (and allowances) are in.
    "PRICES": {},
    "CURRENCY": "USD",
    # Whether the person's words (questions, replies, tool arguments and results) go on trace spans
    # (assistant/tracing/): they are the person's data, so not unless this says so.
    "TRACE_CONTENT": False,
    "PROVIDERS": {},
    # Failover (assistant/llm/failover.py): retries of a transient failure per provider and call,
    # exponential backoff from RETRY_BACKOFF_SECONDS capped at RETRY_BACKOFF_MAX_SECONDS; a
    # Retry-After longer than RETRY_AFTER_MAX_SECONDS fails over instead of waiting.
    "PROVIDER_RETRIES": 2,
    "RETRY_BACKOFF_SECONDS": 0.5,
    "RETRY_BACKOFF_MAX_SECONDS": 8.0,
    "RETRY_AFTER_MAX_SECONDS": 30.0,
    # The shared circuit breaker: opens after this many calls failed their retries, for the cool-down.
    "BREAKER_FAILURE_THRESHOLD": 1,
    "BREAKER_COOLDOWN_SECONDS": 30.0,
    # A provider that failed permanently (auth, payment, unknown model) is skipped this long,
    # or until its configuration (key, URL, model) changes.
    "PERMANENT_FAILURE_SECONDS": 3600,
    # Workers (assistant/runs/lease.py, assistant/turn/sweeper.py): a worker holds a run under a lease
    # this long, renewed while it lives; every worker sweeps this often for runs whose lease ran out
    # (re-enqueued at most once per lease period) and for queued runs no worker took up within the grace.
    "LEASE_SECONDS": 10.0,
    "SWEEP_INTERVAL_SECONDS": 5.0,
    "QUEUED_GRACE_SECONDS": 30.0,
    # /healthz (assistant/operations/health.py): anonymous callers get the status only; staff, or a caller sending
    # `Authorization: Bearer <HEALTH_TOKEN>` (when set), also get each part's details. The worker check
    # is shared for HEALTH_WORKER_CHECK_SECONDS, however often the page is asked.
    "HEALTH_TOKEN": "",
    "HEALTH_WORKER_CHECK_SECONDS": 5.0,
    # The admin: runs, steps, messages, memories and chats are evidence of what the assistant did, so nobody
    # (superusers included) adds, changes or deletes them there; True gives back Django's usual permissions.
    # Retention is `manage.py assistant_prune --older-than 90d`.
    "ADMIN_EVIDENCE_EDITABLE": False,
    # Dictation (assistant/voice/): the model that turns a recording into text, named as chat models are
    # (`openai:whisper-1`, or `NAME:MODEL` for a PROVIDERS entry of kind openai: any server that speaks
    # /v1/audio/transcriptions). None: no microphone in the panel, and the endpoint answers 404. A recording stops
    # by itself after DICTATION_MAX_SECONDS; the endpoint refuses one larger than DICTATION_MAX_BYTES, and more
    # than DICTATIONS_PER_MINUTE from one person. The default maximum stays under Django's FILE_UPLOAD_MAX_MEMORY_SIZE,
    # below which its ASGI handler keeps a request's body in memory too.
    "TRANSCRIPTION_MODEL": None,
    "DICTATION_MAX_SECONDS": 60,
    "DICTATION_MAX_BYTES": 2_000_000,
    "DICTATIONS_PER_MINUTE": 10,
    # The optional sub-apps' keys are theirs: assistant/mcp/conf.py, assistant/evals/conf.py.
}



def known_settings() -> set[str]:
    """The keys of ASSISTANT that something reads: the core's, and those of every installed app that names its
    own (`assistant_setting_defaults` on its AppConfig: the optional sub-apps')."""
    known = set(DEFAULTS)
    # The registry's configs as they are found, without waiting for them all to be ready: each app names its
    # keys on its AppConfig's class, so they are known as soon as Django has found the app.
    for config in list(apps.app_configs.values()):
        known.update(getattr(config, "assistant_setting_defaults", None) or {})
    return known


def settings_problem() -> str | None:
    """What is wrong with the ASSISTANT setting as a whole (not a dict, or keys nobody reads), or None."""
    user_settings = getattr(settings, "ASSISTANT", None) or {}
    if not isinstance(user_settings, dict):
        return f"The ASSISTANT setting must be a dict of settings, not {type(user_settings).__name__}."
    known = known_settings()
    unknown = sorted(set(user_settings) - known)
    if unknown:
        return f"Unknown ASSISTANT setting(s): {', '.join(map(str, unknown))}. Known: {', '.join(sorted(known))}."
    return None


class AppSettings:
    """Attribute access to the keys of ASSISTANT that `defaults` names, with those defaults: the core's are
    `assistant_settings.MAX_MODEL_CALLS`; a sub-app reads its own through an instance of its own."""

    #: Every instance, so that a change of ASSISTANT (override_settings) is read again by all of them.
    instances: list[AppSettings] = []

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._cache: dict[str, Any] | None = None
        AppSettings.instances.append(self)

    def _load(self) -> dict[str, Any]:
        problem = settings_problem()
        if problem is not None:
            raise ImproperlyConfigured(problem)
        user_settings = getattr(settings, "ASSISTANT", None) or {}
        return {**self.defaults, **{key: value for key, value in user_settings.items() if key in self.defaults}}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._cache is None:
            self._cache = self._load()
        try:
            return self._cache[name]
        except KeyError:
            raise AttributeError(f"Unknown ASSISTANT setting {name!r}") from None

    def reload(self) -> None:
        self._cache = None


assistant_settings = AppSettings(DEFAULTS)

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _redis_url_of_channel_layer() -> str | None:
    """The first host of the default channel layer, when it is a channels_redis layer."""
    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get("default") or {}
    if not str(layer.get("BACKEND", "")).startswith("channels_redis."):
        return None
    hosts = (layer.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]  # channels_redis' default
    first = hosts[0] if isinstance(hosts, list | tuple) else hosts
    if isinstance(first, dict):
        first = first.get("address")
    if isinstance(first, list | tuple) and len(first) == 2:
        return f"redis://{first[0]}:{first[1]}/0"
    return first if isinstance(first, str) and first.startswith(_REDIS_SCHEMES) else None


def _redis_url_of_celery_broker() -> str | None:
    url = getattr(settings, "CELERY_BROKER_URL", None)
    return url if isinstance(url, str) and url.startswith(_REDIS_SCHEMES) else None


def assistant_redis_url() -> str:
    """The Redis the assistant keeps its own keys in, from what the project already configures:

    1. `ASSISTANT["REDIS_URL"]`, when set;
    2. otherwise the first host of the default channel layer, when it is a channels_redis layer (a host
       given as a dict uses its "address"; a (host, port) pair means database 0);
    3. otherwise `CELERY_BROKER_URL`, when it is a Redis URL.

    The channel layer comes before the broker because both are needed by every daphne process and every
    worker alike, while the broker may be split off (or be RabbitMQ). Raises ImproperlyConfigured when
    none applies; `manage.py check` reports that as assistant.E021.
    """
    explicit = assistant_settings.REDIS_URL
    if explicit:
        if not isinstance(explicit, str) or not explicit.startswith(_REDIS_SCHEMES):
            raise ImproperlyConfigured(
                f"ASSISTANT['REDIS_URL'] = {explicit!r} is not a redis://, rediss:// or unix:// URL."
            )
        return explicit
    found = _redis_url_of_channel_layer() or _redis_url_of_celery_broker()
    if found is None:
        raise ImproperlyConfigured(
            "The assistant found no Redis for its own keys: the default channel layer is not a channels_redis "
            "layer, CELERY_BROKER_URL is not a Redis URL, and ASSISTANT['REDIS_URL'] is not set."
        )
    return found


def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "ASSISTANT":
        for app_settings in AppSettings.instances:
            app_settings.reload()


setting_changed.connect(_reload_on_change)


def needs_assistant_settings(check: Callable[..., list[CheckMessage]]) -> Callable[..., list[CheckMessage]]:
    """For a check that reads ASSISTANT: while that setting itself is wrong, `check_assistant_setting`
    says so once, and this check says nothing (instead of failing `manage.py check` with a traceback)."""

    @functools.wraps(check)
    def guarded(*args: Any, **kwargs: Any) -> list[CheckMessage]:
        return [] if settings_problem() is not None else check(*args, **kwargs)

    return guarded
