"""The staff dashboard: how the assistant did over a date range, for one spec or all of them.

Reads are a handful of aggregate queries (by day and outcome, percentiles, tools, stop reasons, errors,
feedback), whatever the range's length; the charts are SVG drawn here, on the server, with no script: each
has a `<title>`, `role="img"` and an `aria-label` that says its numbers, and the page puts a table with
the same numbers, each a link to the run list filtered to the runs behind it, under every chart.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Aggregate, Count, FloatField, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from assistant.models import AgentRun, AgentStep

#: The range shown when none (or a bad one) is asked for: the last 14 days, today included.
DEFAULT_DAYS = 14
#: The longest range one page draws (a bar a day).
MAX_DAYS = 366
#: Rows in the "top" tables (tools, stop reasons, errors).
TOP = 10

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

#: Outcomes in the order the bars stack them, with their colours; the first four are how runs end.
OUTCOMES: tuple[tuple[str, str, str], ...] = (
    (AgentRun.Status.SUCCEEDED, "succeeded", "#2e7d32"),
    (AgentRun.Status.FAILED, "failed", "#c62828"),
    (AgentRun.Status.TIMED_OUT, "timed out", "#e65100"),
    (AgentRun.Status.CANCELLED, "cancelled", "#616161"),
    (AgentRun.Status.QUEUED, "queued", "#90caf9"),
    (AgentRun.Status.RUNNING, "running", "#1e88e5"),
    (AgentRun.Status.AWAITING_CONFIRMATION, "awaiting confirmation", "#3949ab"),
)
ENDED = (AgentRun.Status.SUCCEEDED, AgentRun.Status.FAILED, AgentRun.Status.TIMED_OUT, AgentRun.Status.CANCELLED)


# --- the question: which days, which spec -------------------------------------------------------------


@dataclass(frozen=True)
class DashboardQuery:
    """Runs created from `start` to `end` (both days included, in the site's time zone), of `spec` or all."""

    start: datetime.date
    end: datetime.date
    spec: str = ""

    @property
    def days(self) -> list[datetime.date]:
        return [self.start + datetime.timedelta(days=n) for n in range((self.end - self.start).days + 1)]

    def as_params(self) -> dict[str, str]:
        params = {"from": self.start.isoformat(), "to": self.end.isoformat()}
        if self.spec:
            params["spec"] = self.spec
        return params


def _day(value: str) -> datetime.date | None:
    if not _ISO_DATE.fullmatch(value):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def parse_query(params: QueryDict | Mapping[str, str], *, today: datetime.date,
                specs: Sequence[str]) -> tuple[DashboardQuery, list[str]]:
    """The query the parameters ask for (`from`, `to` as YYYY-MM-DD, `spec`), and what was wrong with them.

    A bad date, a range that ends before it starts or is longer than MAX_DAYS gives the default range
    (the last DEFAULT_DAYS days); an unknown spec gives every spec. Each problem is one sentence.
    """
    problems: list[str] = []
    default_start = today - datetime.timedelta(days=DEFAULT_DAYS - 1)
    raw_from, raw_to = (params.get("from") or "").strip(), (params.get("to") or "").strip()
    start, end = default_start, today
    bad = [f"“{raw}” is not a date (YYYY-MM-DD)" for raw in (raw_from, raw_to) if raw and _day(raw) is None]
    if bad:
        problems.append(f"{'; '.join(bad)}: showing the last {DEFAULT_DAYS} days.")
    else:
        asked_end = _day(raw_to) if raw_to else today
        asked_start = _day(raw_from) if raw_from else None
        assert asked_end is not None
        if asked_start is None:
            asked_start = asked_end - datetime.timedelta(days=DEFAULT_DAYS - 1)
        if asked_start > asked_end:
            problems.append(f"The range ends ({asked_end}) before it starts ({asked_start}): "
                            f"showing the last {DEFAULT_DAYS} days.")
        elif (asked_end - asked_start).days + 1 > MAX_DAYS:
            problems.append(f"The range is longer than {MAX_DAYS} days: showing the last {DEFAULT_DAYS} days.")
        else:
            start, end = asked_start, asked_end
    spec = (params.get("spec") or "").strip()
    if spec and spec not in specs:
        problems.append(f"No run has the spec “{spec[:100]}”: showing every spec.")
        spec = ""
    return DashboardQuery(start=start, end=end, spec=spec), problems


# --- the reads ----------------------------------------------------------------------------------------


class PercentileCont(Aggregate):
    """PostgreSQL's `percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)`: the continuous
    percentile, interpolated between the two nearest values. NULLs (runs still going) are left out."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"a percentile is a fraction between 0 and 1, not {fraction!r}")
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


@dataclass
class ToolFigures:
    name: str
    calls: int
    failures: int

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


@dataclass
class Dashboard:
    """Every figure the page shows, for one query."""

    query: DashboardQuery
    runs_by_day: dict[datetime.date, dict[str, int]]
    tokens_by_day: dict[datetime.date, int]
    p50_ms: float | None
    p95_ms: float | None
    thumbs_up: int
    thumbs_down: int
    no_feedback: int
    tools: list[ToolFigures]
    stop_reasons: list[tuple[str, int]]
    errors: list[tuple[str, int]]
    by_outcome: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.by_outcome = {status: sum(day.get(status, 0) for day in self.runs_by_day.values())
                           for status, _, _ in OUTCOMES}

    @property
    def runs(self) -> int:
        return sum(self.by_outcome.values())

    @property
    def ended(self) -> int:
        return sum(self.by_outcome[status] for status in ENDED)

    @property
    def success_rate(self) -> float | None:
        """Succeeded among runs that ended (cancelled, timed out and failed ones count against)."""
        return self.by_outcome[AgentRun.Status.SUCCEEDED] / self.ended if self.ended else None

    @property
    def tokens(self) -> int:
        return sum(self.tokens_by_day.values())

    @property
    def rated(self) -> int:
        return self.thumbs_up + self.thumbs_down

    @property
    def most_used_tools(self) -> list[ToolFigures]:
        return sorted(self.tools, key=lambda tool: (-tool.calls, tool.name))[:TOP]

    @property
    def most_failing_tools(self) -> list[ToolFigures]:
        failing = [tool for tool in self.tools if tool.failures]
        return sorted(failing, key=lambda tool: (-tool.failures, -tool.failure_rate, tool.name))[:TOP]


def _bounds(query: DashboardQuery) -> tuple[datetime.datetime, datetime.datetime]:
    """Midnight of the first day and of the day after the last, in the current time zone (as the admin
    reads `created_at__gte=YYYY-MM-DD`)."""
    zone = timezone.get_current_timezone()
    start = datetime.datetime.combine(query.start, datetime.time.min)
    end = datetime.datetime.combine(query.end + datetime.timedelta(days=1), datetime.time.min)
    return timezone.make_aware(start, zone), timezone.make_aware(end, zone)


def runs_in(query: DashboardQuery) -> QuerySet[AgentRun]:
    start, end = _bounds(query)
    runs = AgentRun.objects.filter(created_at__gte=start, created_at__lt=end)
    return runs.filter(spec=query.spec) if query.spec else runs


def specs_list() -> list[str]:
    """Every spec any run was made with, for the filter."""
    return sorted(AgentRun.objects.order_by().values_list("spec", flat=True).distinct())


def _tools_in(runs: QuerySet[AgentRun]) -> list[ToolFigures]:
    """Calls and failed calls per tool in `runs`. (Runs per tool would need COUNT(DISTINCT run), which
    sorts or hashes every call of the range apart: three times the cost on a year of 50,000 runs.)"""
    failed = Q(result__status__in=sorted(AgentStep.FAILED_OUTCOMES))
    rows = (
        AgentStep.objects.filter(run__in=runs.values("id"), kind=AgentStep.Kind.TOOL_CALL).exclude(tool_name="")
        .order_by().values("tool_name").annotate(calls=Count("id"), failures=Count("id", filter=failed))
    )
    return [ToolFigures(row["tool_name"], row["calls"], row["failures"]) for row in rows]


def dashboard_get(query: DashboardQuery) -> Dashboard:
    """The figures for `query`, in five queries whatever the range's length."""
    runs = runs_in(query).order_by()
    runs_by_day: dict[datetime.date, dict[str, int]] = {day: {} for day in query.days}
    tokens_by_day: dict[datetime.date, int] = dict.fromkeys(query.days, 0)
    per_day = runs.annotate(day=TruncDate("created_at")).values("day", "status")
    for row in per_day.annotate(count=Count("id"), tokens=Sum("total_tokens")):
        runs_by_day[row["day"]][row["status"]] = row["count"]
        tokens_by_day[row["day"]] += row["tokens"] or 0
    overall = runs.aggregate(
        p50=PercentileCont("duration_ms", 0.5), p95=PercentileCont("duration_ms", 0.95),
        up=Count("id", filter=Q(quality_score=1.0)), down=Count("id", filter=Q(quality_score=0.0)),
        none=Count("id", filter=Q(quality_score__isnull=True)),
    )
    tools = _tools_in(runs)

    def top(column: str) -> list[tuple[str, int]]:
        rows = runs.exclude(**{column: ""}).values(column).annotate(count=Count("id"))
        return [(row[column], row["count"]) for row in rows.order_by("-count", column)[:TOP]]

    return Dashboard(
        query=query, runs_by_day=runs_by_day, tokens_by_day=tokens_by_day, p50_ms=overall["p50"],
        p95_ms=overall["p95"], thumbs_up=overall["up"], thumbs_down=overall["down"],
        no_feedback=overall["none"], tools=tools, stop_reasons=top("stop_reason"), errors=top("error"),
    )


# --- links to the run list ----------------------------------------------------------------------------


def run_list_url(query: DashboardQuery, **lookups: str) -> str:
    """The admin's run list filtered to `query`'s runs and `lookups` (the run list's own lookups)."""
    start, end = query.start, query.end + datetime.timedelta(days=1)
    params = {"created_at__gte": start.isoformat(), "created_at__lt": end.isoformat()}
    if query.spec:
        params["spec"] = query.spec
    params.update(lookups)
    return f"{reverse('admin:assistant_agentrun_changelist')}?{urlencode(params)}"


def day_query(query: DashboardQuery, day: datetime.date) -> DashboardQuery:
    return DashboardQuery(start=day, end=day, spec=query.spec)


def tool_lookups(name: str, *, failed: bool = False) -> dict[str, str]:
    """Runs that called tool `name` (and where a call of it took no effect, when `failed`)."""
    lookups = {"steps__kind": AgentStep.Kind.TOOL_CALL, "steps__tool_name": name}
    if failed:
        lookups["steps__took_effect"] = "0"
    return lookups


# --- SVG ----------------------------------------------------------------------------------------------


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _svg(width: int, height: int, title: str, label: str, body: Iterable[str],
         links: Iterable[str]) -> SafeString:
    """A chart that scales to its box: an image (`role="img"`, a title, an aria-label carrying the figures)
    and, laid over it, the same bars as links to their runs. The links are hidden from assistive technology
    and kept out of the tab order (an image holds no controls, and the table under the chart carries the
    same links for the keyboard and screen readers); they are there for the mouse."""
    box = f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg"'
    return mark_safe(  # noqa: S308 - every text below is escaped where it is put in
        f'<div class="dashboard-chart-box">'
        f'<svg class="dashboard-chart" {box} role="img" aria-label="{escape(label)}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
        f'<svg class="dashboard-chart-links" {box} aria-hidden="true">{"".join(links)}</svg></div>'
    )


def _bar(x: float, y: float, width: float, height: float, colour: str, href: str, tip: str) -> tuple[str, str]:
    """A bar, and its transparent twin that links to the runs it counts."""
    shape = f'x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}"'
    return (f'<rect {shape} fill="{colour}"/>',
            f'<a href="{escape(href)}" tabindex="-1"><rect {shape} fill="transparent">'
            f"<title>{escape(tip)}</title></rect></a>")


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 13) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="currentColor">{escape(text)}</text>')


def column_chart(*, title: str, summary: str, days: Sequence[datetime.date],
                 series: Sequence[tuple[str, str, Mapping[datetime.date, int]]],
                 href: Any) -> SafeString:
    """Columns a day, stacked by series (`(name, colour, values by day)`); `href(day, name)` links a part."""
    width, height, left, bottom, top = 600, 220, 52, 28, 12
    plot_width, plot_height = width - left - 8, height - bottom - top
    totals = [sum(values.get(day, 0) for _, _, values in series) for day in days]
    peak = max(totals, default=0) or 1
    slot = plot_width / max(len(days), 1)
    bar = max(slot * 0.75, 1)
    links: list[str] = []
    body = [
        f'<line x1="{left}" y1="{top + plot_height}" x2="{width - 8}" y2="{top + plot_height}" '
        f'stroke="currentColor" stroke-opacity="0.4"/>',
        _text(left - 6, top + 10, _number(peak), anchor="end"),
        _text(left - 6, top + plot_height, "0", anchor="end"),
    ]
    label_every = max(1, len(days) // 7)
    for index, day in enumerate(days):
        x = left + index * slot + (slot - bar) / 2
        y = float(top + plot_height)
        for name, colour, values in series:
            value = values.get(day, 0)
            if not value:
                continue
            size = value / peak * plot_height
            y -= size
            shape, link = _bar(x, y, bar, size, colour, href(day, name), f"{day}: {_number(value)} {name}")
            body.append(shape)
            links.append(link)
        if index % label_every == 0:
            body.append(_text(x + bar / 2, height - 10, day.strftime("%d %b"), anchor="middle", size=12))
    return _svg(width, height, title, summary, body, links)


def bar_list_chart(*, title: str, summary: str,
                   rows: Sequence[tuple[str, Sequence[tuple[float, str, str, str]]]]) -> SafeString:
    """Horizontal bars, one row per `(label, parts)`, each part `(value, colour, href, tip)` laid end to end."""
    row_height, label_width, width = 28, 210, 600
    height = max(len(rows), 1) * row_height + 8
    peak = max((sum(part[0] for part in parts) for _, parts in rows), default=0) or 1
    plot_width = width - label_width - 60
    body: list[str] = []
    links: list[str] = []
    for index, (label, parts) in enumerate(rows):
        y = 4 + index * row_height
        shown = label if len(label) <= 26 else f"{label[:25]}…"
        body.append(_text(label_width - 8, y + 18, shown, anchor="end"))
        x = float(label_width)
        for value, colour, href, tip in parts:
            if not value:
                continue
            size = value / peak * plot_width
            shape, link = _bar(x, y + 3, size, row_height - 8, colour, href, tip)
            body.append(shape)
            links.append(link)
            x += size
        body.append(_text(x + 6, y + 18, _number(sum(part[0] for part in parts))))
    if not rows:
        body.append(_text(width / 2, 20, "nothing in this range", anchor="middle"))
    return _svg(width, height, title, summary, body, links)


# --- the page -----------------------------------------------------------------------------------------


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "—"


def charts(board: Dashboard) -> dict[str, SafeString]:
    query = board.query
    shown = [(status, name, colour) for status, name, colour in OUTCOMES
             if status in ENDED or board.by_outcome[status]]
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
        summary=f"Tokens per day, {span}: {_number(board.tokens)} tokens in all; the most in a day "
                f"{_number(max(board.tokens_by_day.values(), default=0))}.",
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
    return {"runs": runs_chart, "tokens": tokens_chart, "tools": tools_chart, "failing": failing_chart,
            "stops": stops_chart, "errors": errors_chart, "feedback": feedback_chart}


def _duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def page_context(board: Dashboard) -> dict[str, Any]:
    """What the template shows: figures already worded, each with the link to its runs."""
    query = board.query
    shown = [(status, name, colour) for status, name, colour in OUTCOMES
             if status in ENDED or board.by_outcome[status]]
    days = [{
        "day": day,
        "runs": sum(board.runs_by_day[day].values()),
        "runs_url": run_list_url(day_query(query, day)),
        "outcomes": [{"count": board.runs_by_day[day].get(status, 0),
                      "url": run_list_url(day_query(query, day), status=status)} for status, _, _ in shown],
        "tokens_shown": _number(board.tokens_by_day[day]),
    } for day in query.days]

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
        "tokens": _number(board.tokens),
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
        **page_context(board),
    }
    return TemplateResponse(request, "admin/assistant/dashboard.html", context)
