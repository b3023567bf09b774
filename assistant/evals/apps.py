from __future__ import annotations

from django.apps import AppConfig


class AssistantEvalsConfig(AppConfig):
    """Eval sets made from recorded runs; the core assistant works without this app."""

    name = "assistant.evals"
    label = "assistant_evals"
    verbose_name = "Assistant evals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from assistant.evals import quality, replays  # noqa: F401  (grades a replay when it ends; judges its recording)
