"""The OAuth authorization server's endpoints for a host that connects hosted agents through OAuth: django-mcpz's,
with its consent page in this product's place (assistant/mcp/oauth.py). Included under any path, in place of
`django_mcpz.oauth.urls`: `path("oauth/", include("assistant.mcp.oauth_urls"))`."""

from __future__ import annotations

from django.urls import path
from django_mcpz.oauth import views

from assistant.mcp import oauth

# django-mcpz's own namespace: its discovery documents and templates reverse these names.
app_name = "django_mcpz_oauth"

urlpatterns = [
    path("authorize", oauth.authorize, name="authorize"),
    # csrf_exempt and login_not_required carry over through functools.wraps: apps call these signed out.
    path("token", oauth.refusing_nul(views.token), name="token"),
    path("register", oauth.refusing_nul(oauth.register, json_body=True), name="register"),
    path("revoke", oauth.refusing_nul(views.revoke), name="revoke"),
]
