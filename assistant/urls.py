"""The assistant's URLs, under its namespace `assistant`: `path("assistant/", include("assistant.urls"))`.

The optional sub-apps' routes are the host's to include, where it installs them. Their URL names are the
assistant's own (`assistant:mcp`, `assistant:tokens`, `assistant:ag-ui`), and Django gives a namespace to one
include alone, so they go into the same include, through `assistant_urls`."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

from assistant import views
from assistant.operations import health
from assistant.voice.views import transcribe_view

app_name = "assistant"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.assistant_page, name="page"),
    path("memories/", views.memories_page, name="memories"),
    path("memories/<int:memory_id>/delete/", views.memory_delete_view, name="memory_delete"),
    path("memories/clear/", views.memories_clear_view, name="memories_clear"),
    path("attachments/", views.attachment_upload_view, name="attachments"),
    path("attachments/<int:attachment_id>/", views.attachment_file_view, name="attachment"),
    # Dictation's recordings in, their text out (404 while no transcription model is configured).
    path("transcribe/", transcribe_view, name="transcribe"),
    # Public, unlike the pages above: load balancers and uptime checks ask it without signing in.
    path("healthz", health.healthz, name="healthz"),
]


def assistant_urls(*sub_apps: str) -> tuple[list[URLPattern | URLResolver], str]:
    """The assistant's URLs and those of the optional sub-apps a host installs (their URL modules, by name), for
    `include()`, all under the namespace `assistant`:

        path("assistant/", include(assistant_urls(
            "assistant.mcp.urls",   # the person's own agent over MCP, their tokens' pages
            "assistant.agui.urls",  # the AG-UI endpoint
        ))),

    With no sub-app it is `include("assistant.urls")`."""
    return [*urlpatterns, *(path("", include(module)) for module in sub_apps)], app_name
