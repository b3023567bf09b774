"""The dashboard page: its figures worded, its charts, and every number's link to the run list filtered
to the runs behind it (with the run list's own lookups)."""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from assistant.channel_policies import channel_policy
from assistant.conf import assistant_settings
from assistant.dashboard.reads import (
    TOP,
    TREE_CHOICES,
    Dashboard,
    DashboardQuery,
    MemberSteps,
    ToolFigures,
    dashboard_channel_choices,
    dashboard_get,
    parse_query,
    specs_list,
)
from assistant.dashboard.svg import bar_list_chart, column_chart, format_number
from assistant.llm.prices import cost_words
from assistant.models import AgentRun, AgentStep

# --- links to the run list ----------------------------------------------------------------------------


def run_list_url(query: DashboardQuery, **lookups: str) -> str:
    """The admin's run list filtered to `query`'s runs and `lookups` (the run list's own lookups)."""
    start, end = query.start, query.end + datetime.timedelta(days=1)
    params = {"created_at__gte": start.isoformat(), "created_at__lt": end.isoformat()}
    if query.spec:
        params["spec"] = query.spec
    if query.tree:
        params["tree"] = query.tree
    if query.channel:
        params["channel"] = query.channel
    params.update(lookups)
    return f"{reverse('admin:assistant_agentrun_changelist')}?{urlencode(params)}"


def day_query(query: DashboardQuery, day: datetime.date) -> DashboardQuery:
    return DashboardQuery(start=day, end=day, spec=query.spec, tree=query.tree, channel=query.channel)


def tool_lookups(name: str, *, failed: bool = False) -> dict[str, str]:
    """Runs that called tool `name`; with `failed`, runs where a call of it failed, by the call's outcome
    (`AgentStep.FAILED_OUTCOMES`, as `tool_errors` counts them; a read's successful call takes no effect
    too, so `took_effect` cannot tell)."""
    lookups = {"steps__kind": AgentStep.Kind.TOOL_CALL, "steps__tool_name": name}
    if failed:
        lookups["steps__result__status__in"] = ",".join(sorted(AgentStep.FAILED_OUTCOMES))
    return lookups


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "—"


def member_lookups(member: str, *, failed: bool = False) -> dict[str, str]:
    """Runs whose plan (its newest revision) had a step for `member`; with `failed`, one that failed."""
    lookups = {"plan_member": member}
    if failed:
        lookups["plan"] = "step_failed"
    return lookups


def charts(board: Dashboard) -> dict[str, SafeString]:
    query = board.query
    shown = board.outcomes_shown
    outcome_words = ", ".join(f"{board.by_outcome[status]} {name}" for status, name, _ in shown)
    span = f"{query.start} to {query.end}"
    runs_chart = column_chart(
        title=f"Runs per day by outcome, {span}",
        summary=f"Runs per day by outcome, {span}: {board.runs} runs; {outcome_words}.",
        days=query.days,
        series=[(name, colour, {day: board.runs_by_day[day].get(status, 0) for day in query.days})
                for status, name, colour in shown],
        href=lambda day, name: run_list_url(day_query(query, day),
                                            status=next(s for s, n, _ in shown if n == name)),
    )
    tokens_chart = column_chart(
        title=f"Tokens per day, {span}",
        summary=f"Tokens per day, {span}: {format_number(board.tokens)} tokens in all; the most in a day "
                f"{format_number(max(board.tokens_by_day.values(), default=0))}.",
        days=query.days, series=[("tokens", "#6a1b9a", board.tokens_by_day)],
        href=lambda day, name: run_list_url(day_query(query, day)),
    )
    used = board.most_used_tools
    tools_chart = bar_list_chart(
        title="Tools most used (calls; failed calls in red)",
        summary="Tools most used: " + ("; ".join(
            f"{tool.name} {tool.calls} calls, {tool.failures} failed ({_rate(tool.failures, tool.calls)})"
            for tool in used) or "none") + ".",
        rows=[(tool.name, [
            (tool.calls - tool.failures, "#1e88e5", run_list_url(query, **tool_lookups(tool.name)),
             f"{tool.name}: {tool.calls - tool.failures} calls without failure"),
            (tool.failures, "#c62828", run_list_url(query, **tool_lookups(tool.name, failed=True)),
             f"{tool.name}: {tool.failures} failed calls"),
        ]) for tool in used],
    )
    failing = board.most_failing_tools
    failing_chart = bar_list_chart(
        title="Tools failing most (failed calls)",
        summary="Tools failing most: " + ("; ".join(
            f"{tool.name} {tool.failures} of {tool.calls} calls failed ({_rate(tool.failures, tool.calls)})"
            for tool in failing) or "none") + ".",
        rows=[(tool.name, [(tool.failures, "#c62828",
                            run_list_url(query, **tool_lookups(tool.name, failed=True)),
                            f"{tool.name}: {tool.failures} of {tool.calls} calls failed")]) for tool in failing],
    )
    stops_chart = bar_list_chart(
        title="Top stop reasons (runs)",
        summary="Top stop reasons: " + ("; ".join(f"{reason} {count}" for reason, count in board.stop_reasons)
                                        or "none") + ".",
        rows=[(reason, [(count, "#e65100", run_list_url(query, stop_reason=reason), f"{reason}: {count} runs")])
              for reason, count in board.stop_reasons],
    )
    errors_chart = bar_list_chart(
        title="Top errors (runs)",
        summary="Top errors: " + ("; ".join(f"{error[:80]} {count}" for error, count in board.errors)
                                  or "none") + ".",
        rows=[(error, [(count, "#c62828", run_list_url(query, error=error), f"{error[:200]}: {count} runs")])
              for error, count in board.errors],
    )
    feedback_chart = bar_list_chart(
        title="Feedback (runs)",
        summary=f"Feedback: {board.thumbs_up} thumbs up, {board.thumbs_down} thumbs down, "
                f"{board.no_feedback} without feedback; {_rate(board.thumbs_up, board.rated)} of rated runs up.",
        rows=[
            ("thumbs up", [(board.thumbs_up, "#2e7d32", run_list_url(query, quality_score="1.0"),
                            f"{board.thumbs_up} thumbs up")]),
            ("thumbs down", [(board.thumbs_down, "#c62828", run_list_url(query, quality_score="0.0"),
                              f"{board.thumbs_down} thumbs down")]),
            ("no feedback", [(board.no_feedback, "#9e9e9e",
                              run_list_url(query, quality_score__isnull="True"),
                              f"{board.no_feedback} without feedback")]),
        ],
    )
    members = board.plans.members
    members_chart = bar_list_chart(
        title="Plan steps by member (steps; failed in red)",
        summary="Plan steps by member: " + ("; ".join(
            f"{row.member} {row.steps} step{'' if row.steps == 1 else 's'}, {row.failed} failed "
            f"({_rate(row.failed, row.steps)})"
            for row in members) or "none") + ".",
        rows=[(row.member, [
            (row.steps - row.failed, "#00838f", run_list_url(query, **member_lookups(row.member)),
             f"{row.member}: {row.steps - row.failed} plan steps that did not fail"),
            (row.failed, "#c62828", run_list_url(query, **member_lookups(row.member, failed=True)),
             f"{row.member}: {row.failed} failed plan steps"),
        ]) for row in members],
    )
    return {"runs": runs_chart, "tokens": tokens_chart, "tools": tools_chart, "failing": failing_chart,
            "stops": stops_chart, "errors": errors_chart, "feedback": feedback_chart, "members": members_chart}


def _duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def page_context(board: Dashboard) -> dict[str, Any]:
    """What the template shows: figures already worded, each with the link to its runs."""
    query = board.query
    shown = board.outcomes_shown
    days = [{
        "day": day,
        "runs": sum(board.runs_by_day[day].values()),
        "runs_url": run_list_url(day_query(query, day)),
        "outcomes": [{"count": board.runs_by_day[day].get(status, 0),
                      "url": run_list_url(day_query(query, day), status=status)} for status, _, _ in shown],
        "tokens_shown": format_number(board.tokens_by_day[day]),
        "cost_shown": cost_words(board.cost_by_day.get(day)),
    } for day in query.days]

    plans = board.plans

    def member_row(row: MemberSteps) -> dict[str, Any]:
        return {"member": row.member, "steps": row.steps, "failed": row.failed, "skipped": row.skipped,
                "rate": _rate(row.failed, row.steps), "url": run_list_url(query, **member_lookups(row.member)),
                "failed_url": run_list_url(query, **member_lookups(row.member, failed=True))}

    def tool_row(tool: ToolFigures) -> dict[str, Any]:
        return {"name": tool.name, "calls": tool.calls, "failures": tool.failures,
                "rate": _rate(tool.failures, tool.calls),
                "url": run_list_url(query, **tool_lookups(tool.name)),
                "failed_url": run_list_url(query, **tool_lookups(tool.name, failed=True))}

    return {
        "board": board,
        "charts": charts(board),
        "outcomes": [{"status": status, "name": name, "colour": colour, "count": board.by_outcome[status],
                      "url": run_list_url(query, status=status)} for status, name, colour in shown],
        "days": days,
        "all_url": run_list_url(query),
        "members_url": run_list_url(query, tree="member"),
        # What the runs are when one channel is chosen ("from the panel"), else each counted channel's share.
        "channel_runs": channel_policy(query.channel).dashboard_runs if query.channel else "",
        "channel_shares": [{"channel": value, "count": count, "url": run_list_url(query, channel=value),
                            "words": channel_policy(value).dashboard_share}
                           for value, count in board.channel_runs.items()],
        "tokens": format_number(board.tokens),
        "spend": {
            "total": cost_words(board.cost, none=""), "currency": assistant_settings.CURRENCY,
            "splits": [{"key": name, "name": name, "rows": [{"name": who, "cost": cost_words(cost)}
                                                            for who, cost in rows]}
                       for name, rows in (("person", board.spend.by_person), ("spec", board.spend.by_spec),
                                          ("model", board.spend.by_model))],
        },
        "success_rate": _rate(board.by_outcome[AgentRun.Status.SUCCEEDED], board.ended),
        "succeeded_url": run_list_url(query, status=AgentRun.Status.SUCCEEDED),
        "p50": _duration(board.p50_ms), "p95": _duration(board.p95_ms),
        "most_used": [tool_row(tool) for tool in board.most_used_tools],
        "most_failing": [tool_row(tool) for tool in board.most_failing_tools],
        "stop_reasons": [{"reason": reason, "count": count, "url": run_list_url(query, stop_reason=reason)}
                         for reason, count in board.stop_reasons],
        "errors": [{"error": error, "count": count, "url": run_list_url(query, error=error)}
                   for error, count in board.errors],
        "feedback": [
            {"name": "Thumbs up", "count": board.thumbs_up, "url": run_list_url(query, quality_score="1.0")},
            {"name": "Thumbs down", "count": board.thumbs_down, "url": run_list_url(query, quality_score="0.0")},
            {"name": "No feedback", "count": board.no_feedback,
             "url": run_list_url(query, quality_score__isnull="True")},
        ],
        "up_share": _rate(board.thumbs_up, board.rated),
        "rated_share": _rate(board.rated, board.runs),
        "plans": plans,
        "planned_url": run_list_url(query, plan="yes"),
        "unplanned": board.runs - plans.planned,
        "unplanned_url": run_list_url(query, plan="no"),
        "revised_url": run_list_url(query, plan="revised"),
        "step_failed_url": run_list_url(query, plan="step_failed"),
        "planned_share": _rate(plans.planned, board.runs),
        "revised_share": _rate(plans.revised, plans.planned),
        "revisions_per_plan": "—" if plans.revisions_per_plan is None else f"{plans.revisions_per_plan:.1f}",
        "plan_steps_failed_share": _rate(plans.failed, plans.steps),
        "plan_members": [member_row(row) for row in plans.members],
        "containment": board.containment,
        "labelled_url": run_list_url(query, others_text="read"),
        "labelled_share": _rate(board.containment.labelled, board.runs),
        "contained_url": run_list_url(query, others_text="asked"),
        "contained_tools": [{"name": tool.name, "held": tool.held, "approved": tool.approved, "denied": tool.denied,
                             "refused": tool.refused, "url": run_list_url(query, **tool_lookups(tool.name))}
                            for tool in sorted(board.tools, key=lambda tool: (-tool.held - tool.refused, tool.name))
                            if tool.held or tool.refused][:TOP],
    }


def dashboard_view(request: HttpRequest, *, model_admin: Any) -> HttpResponse:
    """The dashboard page, for staff who may view runs (the admin site has already checked `is_staff`)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    specs = specs_list()
    query, problems = parse_query(request.GET, today=timezone.localdate(), specs=specs)
    for problem in problems:
        messages.warning(request, problem)
    board = dashboard_get(query)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Assistant dashboard",
        "query": query,
        "specs": specs,
        "tree_choices": TREE_CHOICES,
        "channel_choices": dashboard_channel_choices(),
        **page_context(board),
    }
    return TemplateResponse(request, "admin/assistant/dashboard.html", context)
