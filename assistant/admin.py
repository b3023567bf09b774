"""Staff review of every chat, run and step. Rows are records of what happened, so they are read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun, AgentStep


class ReadOnlyAdminMixin:
    """Records are evidence: staff may read and delete them, never edit or invent them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AgentMessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = AgentMessage
    fields = ("created_at", "role", "content", "run")
    readonly_fields = fields
    extra = 0
    show_change_link = True


class AgentStepInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = AgentStep
    fields = ("seq", "kind", "state", "tool_name", "arguments", "took_effect", "reason", "duration_ms")
    readonly_fields = fields
    extra = 0
    show_change_link = True


@admin.register(AgentChat)
class AgentChatAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    # A chat its person deleted is still here, with its messages, runs and steps: deleted_at says when.
    list_display = ("__str__", "owner", "spec", "created_at", "updated_at", "deleted_at")
    list_filter = ("spec", ("deleted_at", admin.EmptyFieldListFilter))
    search_fields = ("title", "owner__username")
    date_hierarchy = "updated_at"
    list_select_related = ("owner",)
    inlines = [AgentMessageInline]


class FeedbackFilter(admin.SimpleListFilter):
    """The person's thumbs on the answer (`quality_score` 1.0 up, 0.0 down, null none)."""

    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("up", "Thumbs up"), ("down", "Thumbs down"), ("none", "None")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() == "up":
            return queryset.filter(quality_score__gte=0.5)
        if self.value() == "down":
            return queryset.filter(quality_score__lt=0.5)
        if self.value() == "none":
            return queryset.filter(quality_score__isnull=True)
        return queryset


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id", "owner", "spec", "model", "status", "model_calls", "tool_calls", "tool_errors",
        "total_tokens", "duration_ms", "feedback", "created_at",
    )
    list_filter = ("status", FeedbackFilter, "spec", "model")
    search_fields = ("owner__username", "reply", "error", "feedback_comment")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    inlines = [AgentStepInline]
    # The session key signs the person in: staff review where a run came from, never their session.
    exclude = ("session_key",)

    @admin.display(description="feedback", ordering="quality_score")
    def feedback(self, run: AgentRun) -> str:
        """👍 or 👎 with the start of the person's comment; "—" without feedback."""
        if run.quality_score is None:
            return "—"
        thumb = "👍" if run.quality_score >= 0.5 else "👎"
        comment = run.feedback_comment
        return f"{thumb} {comment[:80]}{'…' if len(comment) > 80 else ''}".strip()

    def get_urls(self) -> list[Any]:
        """The runs' dashboard beside the run list (assistant/dashboard/), for staff who may view runs."""
        # Imported here so that this method is the dashboard's whole footprint in this module.
        from django.http import HttpResponse
        from django.urls import path

        from assistant.dashboard import dashboard_view

        def dashboard(request: HttpRequest) -> HttpResponse:
            return dashboard_view(request, model_admin=self)

        dashboard_url = path("dashboard/", self.admin_site.admin_view(dashboard), name="assistant_agentrun_dashboard")
        return [dashboard_url, *super().get_urls()]


@admin.register(AgentStep)
class AgentStepAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("run", "seq", "kind", "state", "tool_name", "took_effect", "duration_ms", "created_at")
    list_filter = ("kind", "state", "took_effect")
    search_fields = ("tool_name", "reason")
    list_select_related = ("run",)


@admin.register(AgentMessage)
class AgentMessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("chat", "owner", "role", "created_at")
    list_filter = ("role",)
    search_fields = ("content", "owner__username")
    list_select_related = ("chat", "owner")


@admin.register(AgentMemory)
class AgentMemoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("__str__", "owner", "spec", "dims", "embedder", "created_at")
    list_filter = ("spec", "embedder", "dims")
    search_fields = ("content", "owner__username")
    exclude = ("embedding",)
    list_select_related = ("owner",)
