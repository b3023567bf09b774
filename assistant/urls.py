from __future__ import annotations

from django.urls import path

from assistant import views

app_name = "assistant"

urlpatterns = [
    path("", views.assistant_page, name="page"),
    path("memories/", views.memories_page, name="memories"),
    path("memories/<int:memory_id>/delete/", views.memory_delete_view, name="memory_delete"),
    path("memories/clear/", views.memories_clear_view, name="memories_clear"),
]
