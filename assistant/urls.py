from __future__ import annotations

from django.apps import apps
from django.urls import path

from assistant import views
from assistant.operations import health

app_name = "assistant"

urlpatterns = [
    path("", views.assistant_page, name="page"),
    path("memories/", views.memories_page, name="memories"),
    path("memories/<int:memory_id>/delete/", views.memory_delete_view, name="memory_delete"),
    path("memories/clear/", views.memories_clear_view, name="memories_clear"),
    # Public, unlike the pages above: load balancers and uptime checks ask it without signing in.
    path("healthz", health.healthz, name="healthz"),
]

# The optional sub-apps' pages come with this include when the host installs them, and only then.
if apps.is_installed("assistant.mcp"):
    from assistant.mcp.urls import urlpatterns as mcp_urlpatterns

    urlpatterns += mcp_urlpatterns
if apps.is_installed("assistant.agui"):
    from assistant.agui.urls import urlpatterns as agui_urlpatterns

    urlpatterns += agui_urlpatterns
