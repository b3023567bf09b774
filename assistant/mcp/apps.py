from __future__ import annotations

from django.apps import AppConfig


class AssistantMcpConfig(AppConfig):
    """Access tokens for the person's own agent; the core assistant works without this app."""

    name = "assistant.mcp"
    label = "assistant_mcp"
    verbose_name = "Assistant access tokens"
    default_auto_field = "django.db.models.BigAutoField"
