"""The AG-UI endpoint (`assistant:ag-ui`), under the assistant's own namespace: a host that installs this app
includes it beside the assistant's URLs, `path("assistant/", include(assistant_urls("assistant.agui.urls")))`
(assistant/urls.py; `/assistant/ag-ui/` where the assistant is at
`/assistant/`), and `manage.py check` says so (assistant.W051) while it is not routed."""

from __future__ import annotations

from django.urls import path

from assistant.agui import views

urlpatterns = [
    path("ag-ui/", views.endpoint, name="ag-ui"),
]
