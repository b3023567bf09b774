"""Eval sets, cases and runs in the admin: evidence, read-only unless EVALS_EDITABLE (then a case's expectations,
and deleting, as Django's permissions allow); the run list's action that adds runs to a set; the set list's
action that replays a set against a candidate; and an eval run's page, which is its report."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from assistant.evals._pages import eval_run_page
from assistant.evals.cases import CaseRefused, case_add, proposal_reason, set_named, tool_calls_of
from assistant.evals.conf import evals_settings
from assistant.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from assistant.evals.replays import Candidate, EvalRefused, eval_run_refresh, eval_run_start
from assistant.llm import ModelError, get_model
from assistant.models import AgentRun
from assistant.society.members import members
from registry.admin_queries import StrictAdminQueryMixin


def evals_editable() -> bool:
    return bool(evals_settings.EVALS_EDITABLE)


class EvalEvidenceMixin:
    """Nobody adds here (cases come from runs, sets with them); changing and deleting where the setting
    allows it, and then as Django's permissions allow."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return evals_editable() and super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return evals_editable() and super().has_delete_permission(request, obj)  # type: ignore[misc]


class EvalCaseInline(EvalEvidenceMixin, admin.TabularInline):
    model = EvalCase
    fields = ("question_shown", "spec", "owner_username", "tool_calls", "source_run_link", "reason")
    readonly_fields = fields
    extra = 0
    show_change_link = True

    @admin.display(description="question")
    def question_shown(self, case: EvalCase) -> str:
        return case.question[:120]

    @admin.display(description="tool calls")
    def tool_calls(self, case: EvalCase) -> str:
        return ", ".join(call["tool"] for call in tool_calls_of(case.recording)) or "none"

    @admin.display(description="recorded run")
    def source_run_link(self, case: EvalCase) -> str:
        return _run_link(case)


def _run_link(case: EvalCase) -> str:
    if case.source_run_id is None:
        return f"#{case.source_run_number} (not on this site)" if case.source_run_number else "—"
    return format_html('<a href="{}">run #{}</a>', reverse("admin:assistant_agentrun_change",
                                                           args=[case.source_run_id]), case.source_run_id)


class ReplayForm(forms.Form):
    """The candidate a set is replayed against, and what each case is compared with."""

    label = forms.CharField(max_length=EvalResult._meta.get_field("candidate").max_length, initial="candidate",
                            help_text="The candidate's name in the report.")
    model = forms.CharField(required=False, max_length=AgentRun._meta.get_field("model").max_length,
                            help_text="A model spec such as openai:gpt-4o-mini (a comma-separated chain fails over); "
                                      "empty: each spec's own model.")
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
                                   help_text="Empty: each spec's own instructions.")
    spec = forms.ChoiceField(required=False, help_text="Replay every case under this spec, or each under its own.")
    baseline = forms.ChoiceField(initial="recorded", help_text="What each case's grade is compared with.")

    def __init__(self, *args: Any, eval_set: EvalSet, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        specs, baselines = cast(forms.ChoiceField, self.fields["spec"]), cast(forms.ChoiceField,
                                                                              self.fields["baseline"])
        specs.choices = [("", "each case's own"), *((name, name) for name in members())]
        earlier = [(str(run.pk), f"eval run {run.pk} of {timezone.localtime(run.created_at):%Y-%m-%d %H:%M} "
                                 f"({', '.join(c.get('label', '') for c in run.candidates)}; {run.status})")
                   for run in eval_set.eval_runs.order_by("-created_at", "-id")[:50]]
        baselines.choices = [("recorded", "the recording itself, graded the same way"), *earlier]

    def clean_model(self) -> str:
        # A model spec that cannot be built would fail every replay: refused here, before anything is made.
        model = self.cleaned_data["model"].strip()
        if model:
            try:
                get_model(model)
            except ModelError as unusable:
                raise forms.ValidationError(str(unusable)) from None
        return model

    def candidate(self) -> Candidate:
        data = self.cleaned_data
        return Candidate(label=data["label"].strip(), model=data["model"] or None,
                         instructions=data["instructions"] if data["instructions"].strip() else None,
                         spec=data["spec"] or None)


@admin.register(EvalSet)
class EvalSetAdmin(StrictAdminQueryMixin, EvalEvidenceMixin, admin.ModelAdmin):
    list_display = ("name", "case_count", "description", "created_at", "updated_at")
    search_fields = ("name", "description")
    fields = ("name", "description", "created_by", "created_at", "updated_at")
    readonly_fields = ("name", "created_by", "created_at", "updated_at")
    inlines = [EvalCaseInline]
    actions = ["replay_against_candidate"]

    def has_replay_permission(self, request: HttpRequest) -> bool:
        """Starting an eval run is adding one: staff who may only view sets and runs see no such action."""
        return request.user.has_perm(f"{EvalRun._meta.app_label}.add_{EvalRun._meta.model_name}")

    @admin.action(description="Replay against a candidate…", permissions=["replay"])
    def replay_against_candidate(self, request: HttpRequest, queryset: QuerySet[EvalSet]) -> HttpResponse | None:
        """Asks for the candidate and the baseline, then starts the eval run and shows its page."""
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(request, "Choose one eval set to replay: each has its own baselines.", messages.ERROR)
            return None
        eval_set = chosen[0]
        form = ReplayForm(request.POST if request.POST.get("apply") else None, eval_set=eval_set)
        if form.is_bound and form.is_valid():
            try:
                eval_run = eval_run_start(eval_set, [form.candidate()], baseline=form.cleaned_data["baseline"],
                                          by=request.user)
            except EvalRefused as refused:
                self.message_user(request, refused.message, messages.ERROR)
            else:
                replays = eval_run.results.count()
                self.message_user(request, f"Eval run {eval_run.pk} started: {replays} replay"
                                           f"{'' if replays == 1 else 's'} on the workers.", messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:assistant_evals_evalrun_change", args=[eval_run.pk]))
        return TemplateResponse(request, "admin/assistant_evals/replay_form.html", {
            **self.admin_site.each_context(request), "title": f"Replay “{eval_set.name}” against a candidate",
            "eval_set": eval_set, "form": form, "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
        })

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalSet]:
        return super().get_queryset(request).annotate(case_total=Count("cases"))

    @admin.display(description="cases", ordering="case_total")
    def case_count(self, eval_set: EvalSet) -> int:
        return int(getattr(eval_set, "case_total", 0))


@admin.register(EvalCase)
class EvalCaseAdmin(StrictAdminQueryMixin, EvalEvidenceMixin, admin.ModelAdmin):
    list_display = ("__str__", "eval_set", "spec", "owner_username", "reason", "created_at")
    list_filter = ("eval_set", "spec", "reason")
    search_fields = ("question", "owner_username")
    list_select_related = ("eval_set",)
    allowed_lookups = frozenset({"eval_set__id__exact", "spec", "spec__exact", "spec__isnull", "reason",
                                 "reason__exact", "reason__isnull"})
    fields = ("eval_set", "source_run_shown", "owner_username", "spec", "reason", "question", "conversation_shown",
              "recording_shown", "expectations", "created_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Expectations are what staff refine, where editing is allowed; the recording never changes.
        shown = ("eval_set", "source_run_shown", "owner_username", "spec", "reason", "question", "conversation_shown",
                 "recording_shown", "created_at")
        return shown if evals_editable() else (*shown, "expectations")

    @admin.display(description="recorded run")
    def source_run_shown(self, case: EvalCase) -> str:
        return _run_link(case)

    @admin.display(description="conversation before")
    def conversation_shown(self, case: EvalCase) -> str:
        return format_html("<pre>{}</pre>", "\n".join(f"{m['role']}: {m['content']}" for m in case.conversation)
                           or "—")

    @admin.display(description="recording")
    def recording_shown(self, case: EvalCase) -> str:
        return format_html("<pre>{}</pre>", json.dumps(case.recording, indent=2, ensure_ascii=False)[:20_000])


@admin.register(EvalRun)
class EvalRunAdmin(StrictAdminQueryMixin, EvalEvidenceMixin, admin.ModelAdmin):
    """The eval runs, and each one's page: its report, which keeps up while its replays are graded."""

    list_display = ("id", "eval_set", "candidate_labels", "baseline_shown", "status", "progress", "created_at",
                    "finished_at")
    list_display_links = ("id", "eval_set")
    list_filter = ("status", ("eval_set", admin.RelatedOnlyFieldListFilter))
    allowed_lookups = frozenset({"status__exact", "status__isnull", "eval_set__id__exact"})
    list_select_related = ("eval_set",)
    date_hierarchy = "created_at"
    change_form_template = "admin/assistant_evals/evalrun/change_form.html"
    fields = ("eval_set", "candidates_shown", "baseline_shown", "status", "created_by", "created_at", "finished_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalRun]:
        return super().get_queryset(request).annotate(
            result_total=Count("results"),
            result_done=Count("results", filter=~Q(results__status=EvalResult.Status.PENDING)))

    @admin.display(description="candidates")
    def candidate_labels(self, eval_run: EvalRun) -> str:
        return ", ".join(str(candidate.get("label", "")) for candidate in eval_run.candidates) or "—"

    @admin.display(description="candidates")
    def candidates_shown(self, eval_run: EvalRun) -> str:
        return format_html("<pre>{}</pre>", json.dumps(eval_run.candidates, indent=2, ensure_ascii=False))

    @admin.display(description="baseline", ordering="baseline")
    def baseline_shown(self, eval_run: EvalRun) -> str:
        if eval_run.baseline == "recorded":
            return "the recording"
        if not eval_run.baseline.isdigit():
            return eval_run.baseline
        return format_html('<a href="{}">eval run {}</a>', reverse("admin:assistant_evals_evalrun_change",
                                                                  args=[int(eval_run.baseline)]), eval_run.baseline)

    @admin.display(description="progress")
    def progress(self, eval_run: EvalRun) -> str:
        """Replays graded (or not replayable) of all, as "7/10"."""
        return f"{getattr(eval_run, 'result_done', 0)}/{getattr(eval_run, 'result_total', 0)}"

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], add: bool = False,
                           change: bool = False, form_url: str = "", obj: EvalRun | None = None) -> Any:
        if obj is not None:
            # Grades whose signal was lost with a worker are caught here, and the run closed when all are in;
            # the form's fields read the same, refreshed, object.
            eval_run_refresh(obj)
            context["page"] = eval_run_page(obj)
            context["no_refresh"] = request.GET.get("refresh") == "off"
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)


@admin.action(description="Add selected runs to an eval set")
def add_to_eval_set(model_admin: Any, request: HttpRequest, queryset: QuerySet[AgentRun]) -> HttpResponse | None:
    """Asks which set (a new name makes it), then adds each selected top run that has ended as a case."""
    name = (request.POST.get("eval_set") or "").strip()
    if request.POST.get("apply") and name:
        try:
            eval_set = set_named(name, create=True, by=request.user)
        except CaseRefused as refused:
            model_admin.message_user(request, refused.message, messages.ERROR)
            return None
        added, skipped = 0, []
        for run in queryset.order_by("pk"):
            try:
                _case, made = case_add(eval_set, run, reason=proposal_reason(run) if run.quality_score == 0.0
                                       or run.status in (AgentRun.Status.FAILED, AgentRun.Status.TIMED_OUT) else "")
            except CaseRefused as refused:
                skipped.append(refused.message)
                continue
            added += int(made)
        model_admin.message_user(request, f"Added {added} case{'' if added == 1 else 's'} to the eval set "
                                          f"“{eval_set.name}”.", messages.SUCCESS)
        for why in skipped:
            model_admin.message_user(request, why, messages.WARNING)
        return None
    return TemplateResponse(request, "admin/assistant_evals/add_to_set.html", {
        **model_admin.admin_site.each_context(request), "title": "Add runs to an eval set",
        "runs": queryset.order_by("pk")[:200], "sets": EvalSet.objects.order_by("name"),
        "action_checkbox_name": ACTION_CHECKBOX_NAME, "opts": model_admin.model._meta,
    })


# The run list is the assistant's own admin: its action list gains this one where the evals app is installed.
_runs_admin = type(admin.site.get_model_admin(AgentRun))
_runs_admin.actions = [*(_runs_admin.actions or ()), add_to_eval_set]
