"""The access tokens' pages, under the assistant's own namespace (`assistant:tokens`...): `assistant.urls`
adds these when this app is installed, so a host adds no include of its own."""

from __future__ import annotations

from django.urls import path

from assistant.mcp import views

urlpatterns = [
    path("tokens/", views.tokens_page, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
]
