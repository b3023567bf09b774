"""The OAuth discovery documents (RFC 8414, RFC 9728) at the site's root, by name: django-mcpz's views, for a host
that connects hosted agents through OAuth: `path("", include("assistant.mcp.oauth_wellknown"))`."""

from __future__ import annotations

from django.urls import path
from django_mcpz.oauth import views

urlpatterns = [
    path(".well-known/oauth-authorization-server", views.authorization_server_metadata,
         name="oauth_authorization_server"),
    path(".well-known/oauth-authorization-server/<path:issuer_path>", views.authorization_server_metadata,
         name="oauth_authorization_server_at"),
    path(".well-known/oauth-protected-resource", views.protected_resource_metadata,
         name="oauth_protected_resource"),
    path(".well-known/oauth-protected-resource/<path:resource_path>", views.protected_resource_metadata,
         name="oauth_protected_resource_at"),
]
