from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from assistant.operations.health import healthz
from assistant.urls import assistant_urls
from config import views

# The optional sub-apps' routes, beside the assistant's own and in its namespace, where the site installs them
# (config/settings.py installs both; a test's settings may leave one out).
assistant_sub_apps = [urls for app, urls in (
    ("assistant.mcp", "assistant.mcp.urls"),  # the person's own agent over MCP, and their access tokens' pages
    ("assistant.agui", "assistant.agui.urls"),  # the AG-UI endpoint
) if apps.is_installed(app)]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("assistant/", include(assistant_urls(*assistant_sub_apps))),
    # Hosted agents (claude.ai, ChatGPT) connect to the assistant's MCP endpoint through OAuth.
    path("oauth/", include("assistant.mcp.oauth_urls")),
    path("", include("assistant.mcp.oauth_wellknown")),
    path("tracker/", include("tracker.urls")),
]
