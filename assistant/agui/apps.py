from __future__ import annotations

from django.apps import AppConfig


class AssistantAguiConfig(AppConfig):
    """The assistant over AG-UI; the core assistant works without this app."""

    name = "assistant.agui"
    label = "assistant_agui"
    verbose_name = "Assistant over AG-UI"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The protocol's package is checked by a system check (assistant.E050), not here: a site that lacks it
        # still starts, says what is missing, and its endpoint answers 503 saying the same.
        from assistant.agui import checks  # noqa: F401  (registers the AG-UI checks)
