from __future__ import annotations

from django.apps import AppConfig

# Registers the AG-UI checks. The protocol's package is checked by one of them (assistant.E050), not when the app
# loads: a site that lacks it still starts, says what is missing, and its endpoint answers 503 saying the same.
from assistant.agui import checks  # noqa: F401


class AssistantAguiConfig(AppConfig):
    """The assistant over AG-UI; the core assistant works without this app."""

    name = "assistant.agui"
    label = "assistant_agui"
    verbose_name = "Assistant over AG-UI"
    default_auto_field = "django.db.models.BigAutoField"
