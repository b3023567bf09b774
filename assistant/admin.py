"""Staff review of every chat, run and step.

Rows are evidence of what the assistant did: nobody adds, changes or deletes them here, superusers
included, unless `ASSISTANT["ADMIN_EVIDENCE_EDITABLE"]` is True (retention is `manage.py assistant_prune`).
A run's page is its timeline (`assistant/review/`); the run list filters, searches and exports as CSV.

Every list here takes only the lookups it names in `allowed_lookups` (registry/admin_queries.py): Django's
default would answer a yes-or-no question about any column, a run's stored session included."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import date, datetime, time
from typing import Any, cast

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from assistant.conf import assistant_settings
from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun, AgentStep
from assistant.review import run_timeline, runs_csv_rows
from registry.admin_queries import StrictAdminQueryMixin


def evidence_editable() -> bool:
    return bool(assistant_settings.ADMIN_EVIDENCE_EDITABLE)


class EvidenceAdminMixin:
    """Viewing as Django's permissions allow; adding, changing and deleting only when the setting allows it,
    and then as Django's permissions allow."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return evidence_editable() and super().has_add_permission(request, *args)  # type: ignore[misc]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return evidence_editable() and super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return evidence_editable() and super().has_delete_permission(request, obj)  # type: ignore[misc]


class AgentMessageInline(EvidenceAdminMixin, admin.TabularInline):
    model = AgentMessage
    fields = ("created_at", "role", "content", "run")
    readonly_fields = ("created_at",)
    raw_id_fields = ("run",)
    extra = 0
    show_change_link = True


@admin.register(AgentChat)
class AgentChatAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    # A chat its person deleted is still here, with its messages, runs and steps: deleted_at says when.
    list_display = ("__str__", "owner", "spec", "created_at", "updated_at", "deleted_at")
    list_filter = ("spec", ("deleted_at", admin.EmptyFieldListFilter))
    allowed_lookups = frozenset({"spec", "spec__isnull", "deleted_at__isempty"})
    search_fields = ("title", "owner__username")
    date_hierarchy = "updated_at"
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    inlines = [AgentMessageInline]


# --- the run list's filters ----------------------------------------------------------------------
# Their parameter names are the plain field names (`?status=failed`, `?stop_reason=max_tool_calls`), so a
# link from elsewhere (the dashboard) shows as the chosen filter in the sidebar.


class _ExactValueFilter(admin.SimpleListFilter):
    """Runs whose field `parameter_name` is exactly the chosen value; the choices are the values present."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        field = str(self.parameter_name)
        values = (model_admin.get_queryset(request).exclude(**{field: ""})
                  .order_by(field).values_list(field, flat=True).distinct())
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() is None:
            return queryset
        return queryset.filter(**{str(self.parameter_name): self.value()})


class StatusFilter(_ExactValueFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(AgentRun.Status.choices)


class StopReasonFilter(_ExactValueFilter):
    title = "stop reason"
    parameter_name = "stop_reason"


class SpecFilter(_ExactValueFilter):
    title = "spec"
    parameter_name = "spec"


class ErrorFilter(admin.SimpleListFilter):
    """Whether the run ended with an error. The column is blank, never null, for none: `error__isnull` (the
    name a link would use) means "no error" here, not "a NULL nobody ever writes"."""

    title = "error"
    parameter_name = "error__isnull"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("False", "Has an error"), ("True", "None")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() in ("True", "true", "1"):
            return queryset.filter(error="")
        if self.value() in ("False", "false", "0"):
            return queryset.exclude(error="")
        return queryset


class TreeFilter(admin.SimpleListFilter):
    """Top runs (what a person's message started) or members' runs (work a run handed to a member)."""

    title = "place in its tree"
    parameter_name = "tree"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("top", "Top runs"), ("member", "Members' runs")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() is None:
            return queryset
        if self.value() not in ("top", "member"):
            # Not "every run": a link that asks for something else is told so (StrictAdminQueryMixin).
            raise IncorrectLookupParameters(f"“{self.value()}” is neither top nor member")
        return queryset.filter(parent__isnull=self.value() == "top")


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


class CreatedFilter(admin.DateFieldListFilter):
    """Django's date filter (`created_at__gte` / `created_at__lt`), also taking plain ISO dates
    (`?created_at__gte=2026-11-01`) as midnight in the site's time zone."""

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        for name, values in self.used_parameters.items():
            if name.endswith("__isnull"):
                continue
            try:
                self.used_parameters[name] = [_as_moment(value) for value in cast(list[Any], values)]
            except ValueError as error:
                raise IncorrectLookupParameters(error) from error
        return super().queryset(request, queryset)


def _as_moment(value: Any) -> Any:
    if isinstance(value, str) and len(value) == 10:
        return timezone.make_aware(datetime.combine(date.fromisoformat(value), time.min))
    return value


class _Echo:
    """A file-like object whose write returns what it was given: csv.writer then yields lines to stream."""

    def write(self, value: str) -> str:
        return value


#: Everything the run list may be filtered by (and the date drill-down, `created_at__year` and so on): its
#: filters' own parameters, and what the dashboard's and a run page's links use — `error` (exact),
#: `quality_score`, and the steps' (a run with a step of that tool that failed:
#: `steps__tool_name=X&steps__took_effect=0&steps__kind=tool_call`, one step matching all three). Nothing
#: of where a run came from (its session above all) is a filter.
RUN_LIST_LOOKUPS = frozenset({
    "status", "stop_reason", "error__isnull", "spec", "tree", "owner__id__exact", "owner__isnull", "feedback",
    "created_at__gte", "created_at__lt", "model", "model__isnull",
    "error", "quality_score", "quality_score__isnull",
    "steps__tool_name", "steps__took_effect", "steps__kind", "steps__result__status__in",
})


@admin.register(AgentRun)
class AgentRunAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    # Short cells, so the list fits 1,400 px beside its filters; the run's page has everything.
    # (The spec is a filter, and on the run's page and in the CSV.)
    list_display = ("id", "created", "owner", "place", "outcome", "error_preview", "calls", "tokens", "duration",
                    "feedback")
    list_display_links = ("id", "created")
    list_filter = (StatusFilter, StopReasonFilter, ErrorFilter, SpecFilter, TreeFilter,
                   ("owner", admin.RelatedOnlyFieldListFilter), FeedbackFilter, ("created_at", CreatedFilter), "model")
    search_fields = ("owner__username", "messages__content", "reply", "error", "feedback_comment")
    search_help_text = "The owner's username, or words of the question, the reply, the error or the feedback."
    allowed_lookups = RUN_LIST_LOOKUPS
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    list_per_page = 50
    actions = ["export_csv"]
    raw_id_fields = ("owner", "chat")
    readonly_fields = ("created_at",)
    change_form_template = "admin/assistant/agentrun/change_form.html"
    change_list_template = "admin/assistant/agentrun/change_list.html"
    # Staff review where a run came from, never its session: the session's digest and sealed key are
    # neither fields nor filters here (nor editable at all), and no column shows them.
    fieldsets = (
        ("Outcome", {"classes": ["collapse"], "fields": (
            ("owner", "chat"), ("spec", "model"), ("status", "stop_reason"), "error", "reply", "intent")}),
        ("Figures", {"classes": ["collapse"], "fields": (
            ("model_calls", "tool_calls", "tool_errors"), ("prompt_tokens", "completion_tokens", "total_tokens"),
            "duration_ms")}),
        ("Feedback", {"fields": ("quality_score", "feedback_comment", "feedback_at")}),
        ("Where it came from", {"fields": ("client_address", "client_origin")}),
        ("The workers", {"classes": ["collapse"], "fields": (
            ("created_at", "started_at", "clock_started_at", "finished_at"), ("attempts", "requeued_at"),
            ("lease_owner", "lease_expires_at"), "cancel_requested", "config")}),
    )

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: AgentRun | None = None) -> Any:
        if obj is not None:
            context["timeline"] = run_timeline(obj)
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    # --- columns ---------------------------------------------------------------------------------

    @admin.display(description="created", ordering="created_at")
    def created(self, run: AgentRun) -> str:
        moment = timezone.localtime(run.created_at)
        return format_html("{}<br>{}", f"{moment:%Y-%m-%d}", f"{moment:%H:%M:%S}")

    @admin.display(description="tree", ordering="depth")
    def place(self, run: AgentRun) -> str:
        """"top" for a run a person's message started; a member's run names (and links) the run that asked it,
        and its top run when that is another. From the run's own columns: no query per row."""
        if run.parent_id is None:
            return "top"
        parent = reverse("admin:assistant_agentrun_change", args=[run.parent_id])
        if run.root_id == run.parent_id:
            return format_html('member of <a href="{}">#{}</a>', parent, run.parent_id)
        top = reverse("admin:assistant_agentrun_change", args=[run.root_id])
        return format_html('member of <a href="{}">#{}</a> (top <a href="{}">#{}</a>)', parent, run.parent_id,
                           top, run.root_id)

    @admin.display(description="outcome", ordering="status")
    def outcome(self, run: AgentRun) -> str:
        status = run.get_status_display().lower()
        return f"{status} · {run.stop_reason}" if run.stop_reason else status

    @admin.display(description="error", ordering="error")
    def error_preview(self, run: AgentRun) -> str:
        return run.error if len(run.error) <= 70 else run.error[:69] + "…"

    @admin.display(description="calls: model · tool (failed)")
    def calls(self, run: AgentRun) -> str:
        if run.is_active:
            return "pending"
        failed = f" ({run.tool_errors} failed)" if run.tool_errors else ""
        return f"{run.model_calls} · {run.tool_calls}{failed}"

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, run: AgentRun) -> str:
        return "pending" if run.is_active else f"{run.total_tokens:,}"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, run: AgentRun) -> str:
        if run.is_active:
            return "pending"
        return "—" if run.duration_ms is None else f"{run.duration_ms / 1000:.1f} s"

    @admin.display(description="feedback", ordering="quality_score")
    def feedback(self, run: AgentRun) -> str:
        """👍 or 👎 with the start of the person's comment; "—" without feedback."""
        if run.quality_score is None:
            return "—"
        thumb = "👍" if run.quality_score >= 0.5 else "👎"
        comment = run.feedback_comment
        return f"{thumb} {comment[:60]}{'…' if len(comment) > 60 else ''}".strip()

    # --- export ----------------------------------------------------------------------------------

    @admin.action(description="Export selected runs as CSV")
    def export_csv(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> StreamingHttpResponse:
        """The runs as CSV, a header row first, streamed in the list's order. "Export these N runs" above the
        list posts this action for the whole filtered list (Django's "select all" across pages)."""
        writer = csv.writer(_Echo())
        lines: Iterator[str] = (writer.writerow(row) for row in runs_csv_rows(queryset))
        response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
        response["Content-Disposition"] = f'attachment; filename="agent-runs-{stamp}.csv"'
        return response

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
class AgentStepAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    list_display = ("run", "seq", "kind", "state", "tool_name", "took_effect", "duration_ms", "created_at")
    list_filter = ("kind", "state", "took_effect")
    allowed_lookups = frozenset({"kind__exact", "kind__isnull", "state__exact", "state__isnull",
                                 "took_effect__exact", "took_effect__isnull"})
    search_fields = ("tool_name", "reason")
    list_select_related = ("run",)
    raw_id_fields = ("run",)


@admin.register(AgentMessage)
class AgentMessageAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    list_display = ("chat", "owner", "role", "created_at")
    list_filter = ("role",)
    allowed_lookups = frozenset({"role__exact", "role__isnull"})
    search_fields = ("content", "owner__username")
    list_select_related = ("chat", "owner")
    raw_id_fields = ("chat", "owner", "run")


@admin.register(AgentMemory)
class AgentMemoryAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    list_display = ("__str__", "owner", "spec", "dims", "embedder", "created_at")
    list_filter = ("spec", "embedder", "dims")
    allowed_lookups = frozenset({"spec", "spec__isnull", "embedder", "embedder__isnull", "dims", "dims__isnull"})
    search_fields = ("content", "owner__username")
    exclude = ("embedding",)
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
