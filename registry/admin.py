"""Staff read agent profiles here. A profile is the registry's record of how a spec has done for a person,
written only as that person's runs end; so the admin offers no add, change or delete — to anyone,
superusers included — and shows the record as figures and tables, never as its stored JSON."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from registry.admin_queries import StrictAdminQueryMixin
from registry.models import AgentProfile
from registry.selectors import profile_stats, profile_summary
from registry.stats import (
    QUALITY_JUDGE,
    TREND_ARROWS,
    TREND_DEADBAND,
    ProfileStats,
    quality_figure,
    quality_source,
    trend_direction,
)

ORGANISATION = "organisation"


# --- figures as a person reads them ---------------------------------------------------------------


def _percent(fraction: float) -> str:
    return f"{fraction:.0%}"


def _seconds(milliseconds: float) -> str:
    return f"{milliseconds / 1000:.1f} s"


def _number(value: float) -> str:
    """1.25 stays 1.25, 1.0 reads 1."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _trend_arrow(trend: float) -> str:
    """The arrow the summary line shows: ↑ or ↓ beyond the deadband, → within it (as `format_summary`)."""
    return TREND_ARROWS[trend_direction(trend)]


def _trend_figure(trend: float) -> str:
    points = round(trend * 100)
    return f"{_trend_arrow(trend)} {points:+d}%" if points else f"{_trend_arrow(trend)} 0%"


def _trend_meaning(stats: ProfileStats) -> str:
    deadband = _percent(TREND_DEADBAND)
    if stats.sample_size < 2:
        return "Steady by default: fewer than two runs, so there are no two halves of the window to compare."
    arrow = _trend_arrow(stats.trend)
    if arrow == "↑":
        verdict = "Improving"
    elif arrow == "↓":
        verdict = "Getting worse"
    else:
        verdict = f"Steady (a change within ±{deadband} counts as none)"
    points = round(abs(stats.trend) * 100)
    if not points:
        return f"{verdict}: the newer half of the window succeeded as often as the older half."
    return (
        f"{verdict}: the newer half of the window's success rate is {points} point{'s' if points != 1 else ''} "
        f"{'below' if stats.trend < 0 else 'above'} the older half's."
    )


def _counted(pairs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ({count})" for name, count in pairs)


def _quality(entry: dict[str, Any]) -> str:
    """The entry's quality and where it came from: the person's thumbs (1 up, 0 down), a judge's 0–1 grade, or
    "—" when the run was not scored. In words, not emoji: a reviewer's browser may have no emoji font."""
    source = quality_source(entry)
    if source is None:
        return "—"
    score = float(entry["quality_score"])
    if source == QUALITY_JUDGE:
        return f"{score:g} (judged)"
    thumbs = {1.0: " (thumbs up)", 0.0: " (thumbs down)"}.get(score, "")
    return f"{score:g}{thumbs}"


def _calls(entry: dict[str, Any]) -> str:
    """The tools one run called, in order of first call: `name`, `name ×3`, `name (failed)`, `name ×3 (1 failed)`."""
    calls = Counter(entry.get("tools_used") or [])
    failures = Counter(entry.get("failed_tools") or [])
    described = []
    for name, count in calls.items():
        text = f"{name} ×{count}" if count > 1 else name
        failed = min(failures[name], count)
        if failed:
            text += " (failed)" if failed == count == 1 else f" ({failed} failed)"
        described.append(text)
    return ", ".join(described)


def _run_url(run_id: Any) -> str | None:
    """The run's page in this admin; None when the assistant's runs are not in it (or the entry has no run)."""
    if run_id in (None, ""):
        return None
    try:
        return reverse("admin:assistant_agentrun_change", args=[run_id])
    except NoReverseMatch:
        return None


@dataclass(frozen=True)
class WindowRow:
    time: datetime | None
    status: str
    run_id: Any
    run_url: str | None
    duration: str
    tools: str
    tokens: int
    quality: str
    error: str
    #: What its own model calls cost, with its currency ("0.0068 USD"); "—" when no price was known.
    cost: str = "—"


@dataclass(frozen=True)
class ToolRow:
    name: str
    calls: int
    success: int
    failure: int
    failure_rate: str


@dataclass(frozen=True)
class IntentRow:
    name: str
    count: int
    share: str


def _window_rows(window: list[dict[str, Any]]) -> list[WindowRow]:
    """The window as rows, newest first (it is stored oldest first)."""
    rows = []
    for entry in reversed(window):
        timestamp = entry.get("timestamp")
        rows.append(WindowRow(
            time=parse_datetime(timestamp) if isinstance(timestamp, str) else None,
            status=str(entry.get("status") or ""),
            run_id=entry.get("run_id"),
            run_url=_run_url(entry.get("run_id")),
            duration=_seconds(float(entry.get("duration_ms") or 0)),
            tools=_calls(entry),
            tokens=int(entry.get("token_usage") or 0),
            quality=_quality(entry),
            error=str(entry.get("error_summary") or ""),
            cost=_cost_figure(entry.get("cost"), entry.get("currency")),
        ))
    return rows


def _entry_cost(entry: Any) -> Decimal | None:
    """An entry's cost as its assistant filed it (a decimal in text); None without one, or unreadable."""
    try:
        return Decimal(str(entry["cost"])) if isinstance(entry, dict) and entry.get("cost") is not None else None
    except InvalidOperation:
        return None


def _cost_figure(cost: Any, currency: Any) -> str:
    amount = _entry_cost({"cost": cost})
    if amount is None:
        return "—"
    places = Decimal("0.01") if abs(amount) >= 1 else Decimal("0.0001")
    return f"{amount.quantize(places):,} {currency or ''}".strip()


def _window_spend(window: list[Any]) -> str:
    """What the window's runs cost together, with the cost per run that had a price."""
    costs = [(cost, entry.get("currency")) for entry in window if (cost := _entry_cost(entry)) is not None]
    if not costs:
        return "—"
    total = sum((cost for cost, _ in costs), Decimal(0))
    currency = costs[-1][1]
    return (f"{_cost_figure(total, currency)} ({_cost_figure(total / len(costs), currency)} a run, over "
            f"{len(costs)} priced run{'' if len(costs) == 1 else 's'})")


def _tool_rows(tool_usage: dict[str, dict[str, int]]) -> list[ToolRow]:
    """Lifetime per-tool counts, the most called tool first (ties by name)."""
    rows = []
    for name, usage in tool_usage.items():
        success, failure = int(usage.get("success") or 0), int(usage.get("failure") or 0)
        calls = success + failure
        rows.append(ToolRow(name, calls, success, failure, _percent(failure / calls) if calls else "—"))
    return sorted(rows, key=lambda row: (-row.calls, row.name))


def _intent_rows(intent_affinity: dict[str, int]) -> list[IntentRow]:
    """Lifetime intent counts, the most frequent first (ties by name), with each one's share."""
    total = sum(int(count) for count in intent_affinity.values())
    rows = [IntentRow(name, int(count), _percent(int(count) / total) if total else "—")
            for name, count in intent_affinity.items()]
    return sorted(rows, key=lambda row: (-row.count, row.name))


def _asker_rows(window: list[dict[str, Any]]) -> list[IntentRow]:
    """Who the window's runs were for: the person directly, or the spec that handed the work over (an
    entry's `asked_by`), the most frequent first (ties by name), with each one's share."""
    counts: dict[str, int] = {}
    for entry in window:
        if isinstance(entry, dict):
            asker = entry.get("asked_by")
            name = f"the spec “{asker}”" if isinstance(asker, str) and asker else "the person, directly"
            counts[name] = counts.get(name, 0) + 1
    return _intent_rows(counts)


# --- the admin ------------------------------------------------------------------------------------


class OwnerScopeFilter(admin.SimpleListFilter):
    """A person's own profiles or the organisation-wide ones (those without an owner)."""

    title = "owner"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("person", "A person"), (ORGANISATION, "The organisation")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentProfile]) -> QuerySet[AgentProfile]:
        if self.value() == "person":
            return queryset.filter(owner__isnull=False)
        if self.value() == ORGANISATION:
            return queryset.filter(owner__isnull=True)
        return queryset


@admin.register(AgentProfile)
class AgentProfileAdmin(StrictAdminQueryMixin, admin.ModelAdmin):
    list_display = (
        "spec_name", "owner_label", "invocations", "success_rate", "trend", "avg_duration", "last_seen", "quality",
    )
    list_filter = ("spec_name", OwnerScopeFilter)
    # Only what its filters offer: the list answers no other question about a profile's columns.
    allowed_lookups = frozenset({"spec_name", "spec_name__isnull", "scope"})
    search_fields = ("spec_name", "owner__username", "notes")
    list_select_related = ("owner",)
    # The stored JSON (window, tool usage, intents) is shown by the page's own tables, never as fields.
    fields = ("spec_name", "owner_label", "invocations", "first_seen", "last_seen", "notes")
    readonly_fields = fields
    change_form_template = "admin/registry/agentprofile/change_form.html"

    class Media:
        css = {"all": ["registry/admin.css"]}

    # Only the registry writes profiles, as runs end: nobody adds, edits or deletes one here.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @staticmethod
    def _stats(profile: AgentProfile) -> ProfileStats:
        """The profile's stats, computed once per row however many columns show them."""
        cached: ProfileStats | None = getattr(profile, "_admin_stats", None)
        if cached is None:
            cached = profile_stats(profile)
            profile._admin_stats = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="owner", ordering="owner__username")
    def owner_label(self, profile: AgentProfile) -> str:
        return str(profile.owner) if profile.owner_id else ORGANISATION

    @admin.display(description="success rate")
    def success_rate(self, profile: AgentProfile) -> str:
        stats = self._stats(profile)
        return _percent(stats.success_rate) if stats.sample_size else "—"

    @admin.display(description="trend")
    def trend(self, profile: AgentProfile) -> str:
        stats = self._stats(profile)
        return format_html('<span title="{}">{}</span>', _trend_meaning(stats), _trend_arrow(stats.trend))

    @admin.display(description="avg duration")
    def avg_duration(self, profile: AgentProfile) -> str:
        stats = self._stats(profile)
        return _seconds(stats.avg_duration_ms) if stats.sample_size else "—"

    @admin.display(description="quality")
    def quality(self, profile: AgentProfile) -> str:
        return quality_figure(self._stats(profile)) or "—"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        profile = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if profile is not None and self.has_view_permission(request, profile):
            context["review"] = self._review(profile)
        return super().change_view(request, object_id, form_url, extra_context=context)

    def _review(self, profile: AgentProfile) -> dict[str, Any]:
        stats = self._stats(profile)
        return {
            "stats": stats,
            "figures": {
                "invocations": profile.invocations,
                "sample_size": stats.sample_size,
                "success_rate": _percent(stats.success_rate),
                "avg_duration": _seconds(stats.avg_duration_ms),
                "avg_tool_calls": _number(stats.avg_tool_calls),
                "avg_quality": quality_figure(stats) or "—",
                "scored": stats.quality_thumbs + stats.quality_judged,
                "error_rate": _percent(stats.error_rate),
                "trend": _trend_figure(stats.trend),
                "top_tools": _counted(stats.top_tools),
                "top_intents": _counted(stats.top_intents),
                "spend": _window_spend(list(profile.window or [])),
            },
            "trend_meaning": _trend_meaning(stats),
            "deadband": _percent(TREND_DEADBAND),
            "summary": profile_summary(owner=profile.owner, spec_name=profile.spec_name),
            "tools": _tool_rows(profile.tool_usage or {}),
            "intents": _intent_rows(profile.intent_affinity or {}),
            "askers": _asker_rows(list(profile.window or [])),
            "window": _window_rows(list(profile.window or [])),
        }
