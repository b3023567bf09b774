"""The peer's API, mounted where its documentation mounts it."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("ai-assistant/", include("django_ai_assistant.urls"))]
