from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from assistant.operations.health import healthz
from config import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("assistant/", include("assistant.urls")),
    # Hosted agents (claude.ai, ChatGPT) connect to the assistant's MCP endpoint through OAuth.
    path("oauth/", include("assistant.mcp.oauth_urls")),
    path("", include("assistant.mcp.oauth_wellknown")),
    path("tracker/", include("tracker.urls")),
]
