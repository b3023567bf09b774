"""The AG-UI runs in the admin: evidence, read-only, each linking the assistant's run it followed."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from assistant.agui.models import AguiRun


@admin.register(AguiRun)
class AguiRunAdmin(admin.ModelAdmin):
    list_display = ("run_id", "thread_id", "owner", "kind", "assistant_run_link", "asked_with", "created_at")
    list_filter = ("kind",)
    search_fields = ("owner__username", "thread_id", "run_id")
    list_select_related = ("owner",)
    fields = ("owner", "thread_id", "run_id", "kind", "message_id", "chat", "assistant_run", "token_id",
              "created_at")
    readonly_fields = fields

    @admin.display(description="assistant run")
    def assistant_run_link(self, row: AguiRun) -> str:
        return format_html('<a href="{}">Run {}</a>', reverse("admin:assistant_agentrun_change",
                                                                   args=[row.assistant_run_id]), row.assistant_run_id)

    @admin.display(description="asked with")
    def asked_with(self, row: AguiRun) -> str:
        return f"access token {row.token_id}" if row.token_id is not None else "the person's session"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
