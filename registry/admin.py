from __future__ import annotations

from django.contrib import admin

from registry.models import AgentProfile


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    list_display = ("spec_name", "owner", "invocations", "first_seen", "last_seen")
    list_filter = ("spec_name",)
    search_fields = ("spec_name", "owner__username", "notes")
    readonly_fields = ("first_seen", "last_seen", "invocations", "window", "tool_usage", "intent_affinity")
    list_select_related = ("owner",)
