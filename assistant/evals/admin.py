"""Eval sets and cases in the admin: evidence, read-only unless EVALS_EDITABLE (then a case's expectations,
and deleting, as Django's permissions allow); and the run list's action that adds runs to a set."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from assistant.conf import assistant_settings
from assistant.evals.cases import CaseRefused, case_add, proposal_reason, set_named, tool_calls_of
from assistant.evals.models import EvalCase, EvalSet
from assistant.models import AgentRun


def evals_editable() -> bool:
    return bool(assistant_settings.EVALS_EDITABLE)


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
    return format_html('<a href="../../../assistant/agentrun/{}/change/">run #{}</a>', case.source_run_id,
                       case.source_run_id)


@admin.register(EvalSet)
class EvalSetAdmin(EvalEvidenceMixin, admin.ModelAdmin):
    list_display = ("name", "case_count", "description", "created_at", "updated_at")
    search_fields = ("name", "description")
    fields = ("name", "description", "created_by", "created_at", "updated_at")
    readonly_fields = ("name", "created_by", "created_at", "updated_at")
    inlines = [EvalCaseInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalSet]:
        return super().get_queryset(request).annotate(case_total=Count("cases"))

    @admin.display(description="cases", ordering="case_total")
    def case_count(self, eval_set: EvalSet) -> int:
        return int(getattr(eval_set, "case_total", 0))


@admin.register(EvalCase)
class EvalCaseAdmin(EvalEvidenceMixin, admin.ModelAdmin):
    list_display = ("__str__", "eval_set", "spec", "owner_username", "reason", "created_at")
    list_filter = ("eval_set", "spec", "reason")
    search_fields = ("question", "owner_username")
    list_select_related = ("eval_set",)
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
