from __future__ import annotations

from django.urls import path

from assistant import views

app_name = "assistant"

urlpatterns = [
    path("", views.assistant_page, name="page"),
]
