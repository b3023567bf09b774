"""The AG-UI endpoint (`assistant:ag-ui`), under the assistant's own namespace: `assistant.urls` adds it when this
app is installed, so a host adds no include of its own (`/assistant/ag-ui/` where the assistant is at
`/assistant/`)."""

from __future__ import annotations

from django.urls import path

from assistant.agui import views

urlpatterns = [
    path("ag-ui/", views.endpoint, name="ag-ui"),
]
