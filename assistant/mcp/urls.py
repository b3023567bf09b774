"""The MCP endpoint (`assistant:mcp`) and the access tokens' pages (`assistant:tokens`...), under the
assistant's own namespace: `assistant.urls` adds these when this app is installed, so a host adds no include
of its own."""

from __future__ import annotations

from django.urls import path

from assistant.mcp import views
from assistant.mcp.server import SERVER

urlpatterns = [
    path("mcp/", SERVER, name="mcp"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
]
