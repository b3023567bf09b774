"""The MCP endpoint (`assistant:mcp`) and the access tokens' pages (`assistant:tokens`...), under the
assistant's own namespace: a host that installs this app includes them beside the assistant's URLs,
`path("assistant/", include(assistant_urls("assistant.mcp.urls")))` (assistant/urls.py), and
`manage.py check` says so (assistant.W041) while they are not routed."""

from __future__ import annotations

from django.urls import path

from assistant.mcp import views
from assistant.mcp.server import SERVER

urlpatterns = [
    path("mcp/", SERVER, name="mcp"),
    path("tokens/", views.tokens_page, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
]
