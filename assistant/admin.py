"""Staff review of every chat, run and step.

Rows are evidence of what the assistant did: nobody adds, changes or deletes them here, superusers
included, unless `ASSISTANT["ADMIN_EVIDENCE_EDITABLE"]` is True (retention is `manage.py assistant_prune`).
A run's page is its timeline (`assistant/review/`); the run list filters, searches and exports as CSV.

Every list here takes only the lookups it names in `allowed_lookups` (registry/admin_queries.py): Django's
default would answer a yes-or-no question about any column, a run's stored session included."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from assistant.channel_policies import channel_policy
from assistant.conf import assistant_settings
from assistant.dashboard import dashboard_view
from assistant.llm.prices import cost_words
from assistant.models import (
    AgentAllowance,
    AgentChat,
    AgentMemory,
    AgentMessage,
    AgentPlan,
    AgentRun,
    AgentStep,
)
from assistant.review import run_timeline
from assistant.review.export import runs_csv_lines
from assistant.review.filters import (
    ChannelFilter,
    CreatedFilter,
    ErrorFilter,
    FeedbackFilter,
    OthersTextFilter,
    PlanFilter,
    PlanRevisionFilter,
    PlanStepStatusFilter,
    SpecFilter,
    StatusFilter,
    StopReasonFilter,
    TreeFilter,
)
from assistant.review.plans import plan_anchor, plan_status
from assistant.runs.allowances import PERIODS, period_bounds, spent_by_people, spent_since
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
    # `parent`: the message each follows; messages with one parent are branches (an edit, an answer given again).
    fields = ("created_at", "role", "content", "run", "parent")
    readonly_fields = ("created_at",)
    raw_id_fields = ("run", "parent")
    extra = 0
    show_change_link = True


@admin.register(AgentChat)
class AgentChatAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    # A chat its person deleted is still here, with its messages, runs and steps: deleted_at says when.
    # A chat of another channel than the panel's is, say, the record of one access token's calls (the person's
    # own agent over MCP): assistant/channel_policies.py.
    list_display = ("__str__", "owner", "spec", "channel_shown", "created_at", "updated_at", "deleted_at")
    list_filter = ("spec", ChannelFilter, ("deleted_at", admin.EmptyFieldListFilter))
    allowed_lookups = frozenset({"spec", "spec__isnull", "channel", "deleted_at__isempty"})
    search_fields = ("title", "owner__username")
    date_hierarchy = "updated_at"
    list_select_related = ("owner",)
    # `leaf`: where the branch its person reads ends (empty: at its newest message).
    raw_id_fields = ("owner", "leaf")
    inlines = [AgentMessageInline]

    @admin.display(description="channel", ordering="channel")
    def channel_shown(self, chat: AgentChat) -> str:
        return chat.get_channel_display()


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
    "plan", "plan_member", "channel", "others_text",
})


@admin.register(AgentRun)
class AgentRunAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    # Short cells, so the list fits 1,400 px beside its filters; the run's page has everything.
    # (The spec is a filter, and on the run's page and in the CSV.)
    list_display = ("id", "created", "owner", "via", "place", "outcome", "error_preview", "calls", "tokens",
                    "spent", "duration", "feedback")
    list_display_links = ("id", "created")
    list_filter = (StatusFilter, StopReasonFilter, ErrorFilter, SpecFilter, ChannelFilter, TreeFilter, PlanFilter,
                   OthersTextFilter, ("owner", admin.RelatedOnlyFieldListFilter), FeedbackFilter,
                   ("created_at", CreatedFilter), "model")
    search_fields = ("owner__username", "messages__content", "reply", "error", "feedback_comment", "client_name")
    search_help_text = ("The owner's username, or words of the question, the reply, the error or the feedback, or "
                        "the name of the access token an MCP run was made with.")
    allowed_lookups = RUN_LIST_LOOKUPS
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    list_per_page = 50
    actions = ["export_csv"]
    raw_id_fields = ("owner", "chat")
    readonly_fields = ("created_at", "client_token_id")
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
        ("Where it came from", {"fields": (("channel", "client_name", "client_token_id"), "client_address",
                                           "client_origin")}),
        ("The workers", {"classes": ["collapse"], "fields": (
            ("created_at", "started_at", "clock_started_at", "finished_at"), ("attempts", "requeued_at"),
            ("lease_owner", "lease_expires_at"), "cancel_requested", "config")}),
    )

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: AgentRun | None = None) -> Any:
        if obj is not None:
            context["timeline"] = run_timeline(obj)
            # What its channel says of it (assistant/channel_policies.py): where it was asked from, and what the
            # page says above the timeline, if anything (an eval's replay: what it replays).
            policy = channel_policy(obj.channel)
            context["channel_asked_from"] = policy.asked_from(obj)
            context["channel_banner"] = policy.banner(obj) if policy.banner is not None else ""
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What deleting these runs takes (only where ADMIN_EVIDENCE_EDITABLE allows it). Their plans go with
        them, as a prune takes them: that the plans' own admin deletes none is no reason to keep the run."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(AgentPlan._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    # --- columns ---------------------------------------------------------------------------------

    @admin.display(description="created", ordering="created_at")
    def created(self, run: AgentRun) -> str:
        moment = timezone.localtime(run.created_at)
        return format_html("{}<br>{}", f"{moment:%Y-%m-%d}", f"{moment:%H:%M:%S}")

    @admin.display(description="via", ordering="channel")
    def via(self, run: AgentRun) -> str:
        """"panel", or what the run's channel says (its policy's `via`: an MCP run's token, say)."""
        return channel_policy(run.channel).via(run)

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

    @admin.display(description="cost", ordering="cost")
    def spent(self, run: AgentRun) -> str:
        """What its own model calls cost; "—" when none had a price."""
        return "pending" if run.is_active else cost_words(run.cost)

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
        response = StreamingHttpResponse(runs_csv_lines(queryset), content_type="text/csv; charset=utf-8")
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
        response["Content-Disposition"] = f'attachment; filename="agent-runs-{stamp}.csv"'
        return response

    def get_urls(self) -> list[Any]:
        """The runs' dashboard beside the run list (assistant/dashboard/), for staff who may view runs."""
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
    raw_id_fields = ("chat", "owner", "run", "parent")


@admin.register(AgentMemory)
class AgentMemoryAdmin(StrictAdminQueryMixin, EvidenceAdminMixin, admin.ModelAdmin):
    list_display = ("__str__", "owner", "spec", "dims", "embedder", "created_at")
    list_filter = ("spec", "embedder", "dims")
    allowed_lookups = frozenset({"spec", "spec__isnull", "embedder", "embedder__isnull", "dims", "dims__isnull"})
    search_fields = ("content", "owner__username")
    exclude = ("embedding",)
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)


# --- plans: evidence of what a run meant to do, read-only whatever the setting --------------------------


@admin.register(AgentPlan)
class AgentPlanAdmin(StrictAdminQueryMixin, admin.ModelAdmin):
    """Each revision of each run's plan, to list and search; a run's page shows its plan in full. Plans are
    evidence the run wrote as it went: nobody adds, changes or deletes one here, whatever
    ADMIN_EVIDENCE_EDITABLE says (a plan goes with its run: a prune, or the run's deletion where allowed)."""

    list_display = ("__str__", "run_page", "revision", "steps_words", "reason_preview", "approval", "created_at")
    list_display_links = ("__str__",)
    list_filter = (PlanRevisionFilter, PlanStepStatusFilter, "approval")
    allowed_lookups = frozenset({"revision", "step_status", "approval__exact", "approval__isnull"})
    search_fields = ("reason", "comment", "steps", "run__owner__username")
    search_help_text = "Words of its steps, of why it was revised or of the person's comment; the owner's username."
    date_hierarchy = "created_at"
    list_select_related = ("run",)
    list_per_page = 50
    fields = ("run_page", "revision", "made_in_step", "reason", "approval", "comment", "answered_at", "created_at",
              "updated_at", "steps_shown")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="run")
    def run_page(self, plan: AgentPlan) -> str:
        """The run's page, at this revision."""
        page = reverse("admin:assistant_agentrun_change", args=[plan.run_id])
        return format_html('<a href="{}#{}">run {}</a>', page, plan_anchor(plan.run_id, plan.revision), plan.run_id)

    @admin.display(description="written by step")
    def made_in_step(self, plan: AgentPlan) -> str:
        if plan.made_in_id is None:
            return "—"
        return format_html('<a href="{}">step id {}</a>',
                           reverse("admin:assistant_agentstep_change", args=[plan.made_in_id]), plan.made_in_id)

    @admin.display(description="steps")
    def steps_words(self, plan: AgentPlan) -> str:
        steps = [step for step in plan.steps if isinstance(step, dict)]
        failed = sum(1 for step in steps if step.get("status") == AgentPlan.Status.FAILED)
        return f"{len(steps)}" + (f" ({failed} failed)" if failed else "")

    @admin.display(description="why this revision")
    def reason_preview(self, plan: AgentPlan) -> str:
        return plan.reason if len(plan.reason) <= 70 else plan.reason[:69] + "…"

    @admin.display(description="its steps")
    def steps_shown(self, plan: AgentPlan) -> str:
        steps = [step for step in plan.steps if isinstance(step, dict)]
        if not steps:
            return "—"
        return format_html("<ol>{}</ol>", format_html_join("", "<li>{} — {}{}{}</li>", (
            (step.get("do", ""), plan_status(str(step.get("status") or "")).words,
             f" (member {step['member']})" if step.get("member") else "",
             f": {step['why']}" if step.get("why") else "") for step in steps)))


class AgentAllowanceForm(forms.ModelForm):
    """An allowance is a person's or a group's, never both, never neither: said on the form, before the database
    would refuse it."""

    class Meta:
        model = AgentAllowance
        fields = ["user", "group", "tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        user, group = cleaned.get("user"), cleaned.get("group")
        if (user is None) == (group is None):
            raise forms.ValidationError("An allowance is for one person or for one group: choose exactly one of them.")
        return cleaned


def _period_starts(now: datetime) -> dict[str, datetime]:
    return {period: period_bounds(period, now)[0] for period in PERIODS}


class _AllowanceChangeList(ChangeList):
    """The allowances' list, whose page of people's rows reads what they spent in one statement."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        people = [allowance for allowance in self.result_list if allowance.user_id is not None]
        spent = spent_by_people({allowance.user_id for allowance in people}, _period_starts(timezone.now()))
        for allowance in people:
            allowance.spent = spent[allowance.user_id]


@admin.register(AgentAllowance)
class AgentAllowanceAdmin(StrictAdminQueryMixin, admin.ModelAdmin):
    """What people and groups may spend on the assistant's models (assistant/runs/allowances.py); a person's
    row says what they have spent today and this month, as a send reads it."""

    form = AgentAllowanceForm
    list_display = ("holder", "tokens_per_day", "tokens_per_month", "cost_per_day", "cost_per_month", "spent_today",
                    "spent_this_month", "updated_at")
    list_select_related = ("user", "group")
    search_fields = ("user__username", "group__name")
    allowed_lookups = frozenset()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return _AllowanceChangeList

    @admin.display(description="for")
    def holder(self, allowance: AgentAllowance) -> str:
        return f"{allowance.user} (person)" if allowance.user_id else f"{allowance.group} (group)"

    def _spent(self, allowance: AgentAllowance, period: str) -> str:
        if allowance.user is None:
            return "—"  # a group's members each have their own spend
        # Read for the whole page at once (_AllowanceChangeList); a row shown alone reads its own.
        spent = getattr(allowance, "spent", None)
        if spent is None:
            spent = spent_since(allowance.user, _period_starts(timezone.now()))
        used = spent[period]
        money = f", {cost_words(used.cost)}" if used.cost else ""
        return f"{used.tokens:,} tokens{money}"

    @admin.display(description="spent today")
    def spent_today(self, allowance: AgentAllowance) -> str:
        return self._spent(allowance, "day")

    @admin.display(description="spent this month")
    def spent_this_month(self, allowance: AgentAllowance) -> str:
        return self._spent(allowance, "month")
