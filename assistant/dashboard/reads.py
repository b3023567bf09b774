"""The dashboard's question (which days, which spec) and its reads: a handful of aggregate queries, by
day and outcome, percentiles and feedback, tools, stop reasons and errors, plans and their steps per member,
whatever the range's length."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Max, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import TruncDate
from django.http import QueryDict
from django.utils import timezone

from assistant.channel_policies import channel_policies
from assistant.models import AgentPlan, AgentRun, AgentStep
from assistant.turn.confirmation import REFUSED_REASON_START

#: The range shown when none (or a bad one) is asked for: the last 14 days, today included.
DEFAULT_DAYS = 14
#: The longest range one page draws (a bar a day).
MAX_DAYS = 366
#: Rows in the "top" tables (tools, stop reasons, errors).
TOP = 10

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: The last day a range may end on: a range reads up to midnight after its last day, and the calendar
#: has no day after 9999-12-31. (A range may start on the calendar's first day, 0001-01-01.)
LAST_DAY = datetime.date.max - datetime.timedelta(days=1)

#: Outcomes in the order the bars stack them, with their colours; the first four are how runs end.
OUTCOMES: tuple[tuple[str, str, str], ...] = (
    (AgentRun.Status.SUCCEEDED, "succeeded", "#2e7d32"),
    (AgentRun.Status.FAILED, "failed", "#c62828"),
    (AgentRun.Status.TIMED_OUT, "timed out", "#e65100"),
    (AgentRun.Status.CANCELLED, "cancelled", "#616161"),
    (AgentRun.Status.QUEUED, "queued", "#90caf9"),
    (AgentRun.Status.RUNNING, "running", "#1e88e5"),
    (AgentRun.Status.AWAITING_CONFIRMATION, "awaiting confirmation", "#3949ab"),
    (AgentRun.Status.AWAITING_MEMBERS, "awaiting members", "#00838f"),
)


#: Which runs of a tree count (`?tree=`, the run list's own parameter): all, the top runs (what a person's
#: message started) or the members' runs (work a run handed to a member, assistant/society/).
TREE_CHOICES: tuple[tuple[str, str], ...] = (("", "All runs"), ("top", "Top runs"), ("member", "Members' runs"))

def dashboard_channel_choices() -> list[tuple[str, str]]:
    """Where the runs were asked from (`?channel=`, the run list's own parameter): all, the person's panel, or a
    channel an installed app registers and offers here (its policy's `dashboard_choice`: assistant/mcp/'s, the
    person's own agent with one of their access tokens)."""
    return [("", "All channels"), *((policy.value, policy.dashboard_choice) for policy in channel_policies()
                                    if policy.dashboard_choice is not None)]


# --- the question: which days, which spec, which runs of a tree ------------------------------------------


@dataclass(frozen=True)
class DashboardQuery:
    """Runs created from `start` to `end` (both days included, in the site's time zone), of `spec` or all,
    top runs, members' runs or all (`tree`: "top", "member" or ""), asked from one channel or all (`channel`:
    one of `dashboard_channel_choices()`, "" for all)."""

    start: datetime.date
    end: datetime.date
    spec: str = ""
    tree: str = ""
    channel: str = ""

    @property
    def days(self) -> list[datetime.date]:
        return [self.start + datetime.timedelta(days=n) for n in range((self.end - self.start).days + 1)]

    def as_params(self) -> dict[str, str]:
        params = {"from": self.start.isoformat(), "to": self.end.isoformat()}
        if self.spec:
            params["spec"] = self.spec
        if self.tree:
            params["tree"] = self.tree
        if self.channel:
            params["channel"] = self.channel
        return params


def _day(value: str) -> datetime.date | None:
    if not _ISO_DATE.fullmatch(value):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


def _shown(raw: str) -> str:
    """What the person typed, as a message quotes it: its beginning when it is long."""
    return raw if len(raw) <= 100 else f"{raw[:100]}…"


def parse_query(params: QueryDict | Mapping[str, str], *, today: datetime.date,
                specs: Sequence[str]) -> tuple[DashboardQuery, list[str]]:
    """The query the parameters ask for (`from`, `to` as YYYY-MM-DD, `spec`, `tree`, `channel`), and what was
    wrong with them.

    A bad date, a day after LAST_DAY, a range that ends before it starts or is longer than MAX_DAYS gives
    the default range (the last DEFAULT_DAYS days); an unknown spec gives every spec, an unknown `tree` all
    runs, an unknown `channel` every channel. Each problem is one sentence.
    """
    problems: list[str] = []
    default_start = today - datetime.timedelta(days=DEFAULT_DAYS - 1)
    raw_from, raw_to = (params.get("from") or "").strip(), (params.get("to") or "").strip()
    start, end = default_start, today
    bad = [f"“{_shown(raw)}” is not a date (YYYY-MM-DD)" for raw in (raw_from, raw_to) if raw and _day(raw) is None]
    bad += [f"“{raw}” is past the last day the dashboard shows ({LAST_DAY})"
            for raw in (raw_from, raw_to) if raw and (_day(raw) or datetime.date.min) > LAST_DAY]
    if bad:
        problems.append(f"{'; '.join(bad)}: showing the last {DEFAULT_DAYS} days.")
    else:
        asked_end = _day(raw_to) if raw_to else today
        asked_start = _day(raw_from) if raw_from else None
        assert asked_end is not None
        if asked_start is None:
            # The days up to the end; fewer when the end is one of the calendar's first days.
            days_before = min(DEFAULT_DAYS - 1, (asked_end - datetime.date.min).days)
            asked_start = asked_end - datetime.timedelta(days=days_before)
        if asked_start > asked_end:
            problems.append(f"The range ends ({asked_end}) before it starts ({asked_start}): "
                            f"showing the last {DEFAULT_DAYS} days.")
        elif (asked_end - asked_start).days + 1 > MAX_DAYS:
            problems.append(f"The range is longer than {MAX_DAYS} days: showing the last {DEFAULT_DAYS} days.")
        else:
            start, end = asked_start, asked_end
    spec = (params.get("spec") or "").strip()
    if spec and spec not in specs:
        problems.append(f"No run has the spec “{_shown(spec)}”: showing every spec.")
        spec = ""
    tree = (params.get("tree") or "").strip()
    if tree not in dict(TREE_CHOICES):
        problems.append(f"“{_shown(tree)}” is not a choice of runs (top or member): showing all runs.")
        tree = ""
    channel = (params.get("channel") or "").strip()
    channels = [value for value, _ in dashboard_channel_choices() if value]
    if channel not in ("", *channels):
        offered = " or ".join([", ".join(channels[:-1]), channels[-1]] if len(channels) > 1 else channels)
        problems.append(f"“{_shown(channel)}” is not a channel ({offered}): showing every channel.")
        channel = ""
    return DashboardQuery(start=start, end=end, spec=spec, tree=tree, channel=channel), problems


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
    #: Of its calls, those containment held: asked the person (and how they answered), or refused outright.
    held: int = 0
    approved: int = 0
    denied: int = 0
    waiting: int = 0
    refused: int = 0

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


@dataclass
class MemberSteps:
    """The plan steps that were for one member (its `ask_<member>` tool), as each plan ended."""

    member: str
    steps: int
    failed: int
    skipped: int

    @property
    def failure_rate(self) -> float:
        return self.failed / self.steps if self.steps else 0.0


@dataclass
class PlanFigures:
    """The plans of the range's runs (assistant/plans/): how many runs planned, how often they revised, and
    what became of the steps of the plans they followed (each run's newest revision, whose statuses are final
    once it has ended), in all and per member."""

    #: Runs that wrote a plan; runs that revised it at least once.
    planned: int = 0
    revised: int = 0
    #: Revisions of all their plans (a plan never revised is one), and the most any one plan had.
    revisions: int = 0
    most_revisions: int = 0
    #: Steps of the plans followed, and those that failed or were skipped.
    steps: int = 0
    failed: int = 0
    skipped: int = 0
    #: Those that were for a member, by member: the most failed first.
    members: list[MemberSteps] = field(default_factory=list)

    @property
    def revisions_per_plan(self) -> float | None:
        return self.revisions / self.planned if self.planned else None


@dataclass
class ContainmentFigures:
    """Runs that read someone else's text, and what became of the writes it held (docs/security.md)."""

    labelled: int = 0
    asked: int = 0
    approved: int = 0
    denied: int = 0
    waiting: int = 0
    #: Asked, and never answered: the run ended first (stopped, signed out, a new message, a limit).
    unanswered: int = 0
    refused: int = 0


@dataclass(frozen=True)
class Spend:
    """What priced model calls cost, split three ways, each a list of (name, cost) dearest first."""

    by_person: list[tuple[str, Decimal]]
    by_spec: list[tuple[str, Decimal]]
    by_model: list[tuple[str, Decimal]]


def _dearest(spent: Mapping[str, Decimal]) -> list[tuple[str, Decimal]]:
    return sorted(spent.items(), key=lambda item: (-item[1], item[0]))[:TOP]


def _spend_in(runs: QuerySet[AgentRun]) -> Spend:
    """Spend by person, spec and model, in two queries: the runs' own costs by person and spec together (a tree's
    members count under their own spec), and the model calls' by the chain entry that answered each."""
    by_person: dict[str, Decimal] = {}
    by_spec: dict[str, Decimal] = {}
    pairs = runs.filter(cost__isnull=False).values("owner__username", "spec").annotate(spent=Sum("cost"))
    for row in pairs:
        by_person[row["owner__username"]] = by_person.get(row["owner__username"], Decimal(0)) + row["spent"]
        by_spec[row["spec"] or "—"] = by_spec.get(row["spec"] or "—", Decimal(0)) + row["spent"]
    calls = (AgentStep.objects.filter(run__in=runs, kind=AgentStep.Kind.MODEL_CALL, cost__isnull=False)
             .annotate(answered_by=KeyTextTransform("provider", "result")).values("answered_by")
             .annotate(spent=Sum("cost")))
    by_model = {str(row["answered_by"] or "—"): row["spent"] for row in calls}
    return Spend(by_person=_dearest(by_person), by_spec=_dearest(by_spec), by_model=_dearest(by_model))


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
    #: How many of the runs are members' runs (work another run handed over).
    member_runs: int = 0
    #: How many were asked from each channel whose share the dashboard counts (its policy's `dashboard_share`:
    #: the calls of people's own agents over MCP, each a run of channel `mcp`), by channel.
    channel_runs: dict[str, int] = field(default_factory=dict)
    plans: PlanFigures = field(default_factory=PlanFigures)
    containment: ContainmentFigures = field(default_factory=ContainmentFigures)
    #: What the runs' model calls cost (the PRICES setting), by day; a day with no priced call has none.
    cost_by_day: dict[datetime.date, Decimal | None] = field(default_factory=dict)
    #: The same, by person (username), spec and model (the chain entry that answered), dearest first.
    spend: Spend = field(default_factory=lambda: Spend([], [], []))
    by_outcome: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.by_outcome = {status: sum(day.get(status, 0) for day in self.runs_by_day.values())
                           for status, _, _ in OUTCOMES}

    @property
    def outcomes_shown(self) -> list[tuple[str, str, str]]:
        """The ways runs end, always; a run still going, when there is one."""
        return [outcome for outcome in OUTCOMES if outcome[0] in AgentRun.ENDED_STATUSES or self.by_outcome[outcome[0]]]

    @property
    def runs(self) -> int:
        return sum(self.by_outcome.values())

    @property
    def ended(self) -> int:
        return sum(self.by_outcome[status] for status in AgentRun.ENDED_STATUSES)

    @property
    def success_rate(self) -> float | None:
        """Succeeded among runs that ended (cancelled, timed out and failed ones count against)."""
        return self.by_outcome[AgentRun.Status.SUCCEEDED] / self.ended if self.ended else None

    @property
    def tokens(self) -> int:
        return sum(self.tokens_by_day.values())

    @property
    def cost(self) -> Decimal | None:
        known = [cost for cost in self.cost_by_day.values() if cost is not None]
        return sum(known, Decimal(0)) if known else None

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
    if query.tree:
        runs = runs.filter(parent__isnull=query.tree == "top")
    if query.channel:
        runs = runs.filter(channel=query.channel)
    return runs.filter(spec=query.spec) if query.spec else runs


def specs_list() -> list[str]:
    """Every spec any run was made with, for the filter."""
    return sorted(AgentRun.objects.order_by().values_list("spec", flat=True).distinct())


def _tools_in(runs: QuerySet[AgentRun]) -> list[ToolFigures]:
    """Calls and failed calls per tool in `runs`, and those containment held, in one query. (Runs per tool would
    need COUNT(DISTINCT run), which sorts or hashes every call of the range apart: three times the cost on a
    year of 50,000 runs.)"""
    failed = Q(result__status__in=sorted(AgentStep.FAILED_OUTCOMES))
    held = Q(containment__isnull=False)
    rows = (
        AgentStep.objects.filter(run__in=runs.values("id"), kind=AgentStep.Kind.TOOL_CALL).exclude(tool_name="")
        .order_by().values("tool_name").annotate(
            calls=Count("id"), failures=Count("id", filter=failed), held=Count("id", filter=held),
            approved=Count("id", filter=held & Q(confirmation=AgentStep.Confirmation.APPROVED)),
            denied=Count("id", filter=held & Q(confirmation=AgentStep.Confirmation.DENIED)),
            waiting=Count("id", filter=held & Q(state=AgentStep.State.AWAITING_CONFIRMATION)),
            refused=Count("id", filter=Q(result__reason__startswith=REFUSED_REASON_START)))
    )
    return [ToolFigures(row["tool_name"], row["calls"], row["failures"], row["held"], row["approved"],
                        row["denied"], row["waiting"], row["refused"]) for row in rows]


def _containment_in(labelled: int, tools: list[ToolFigures]) -> ContainmentFigures:
    asked = sum(tool.held for tool in tools)
    approved, denied = sum(tool.approved for tool in tools), sum(tool.denied for tool in tools)
    waiting = sum(tool.waiting for tool in tools)
    return ContainmentFigures(labelled=labelled, asked=asked, approved=approved, denied=denied, waiting=waiting,
                              unanswered=asked - approved - denied - waiting,
                              refused=sum(tool.refused for tool in tools))


def _plans_in(runs: QuerySet[AgentRun]) -> PlanFigures:
    """The plans of `runs`, in two queries: the revisions, and the steps of each run's newest revision (unnested
    in the database, grouped by member)."""
    plans = AgentPlan.objects.filter(run__in=runs.values("id")).order_by()
    overall = plans.aggregate(planned=Count("run_id", distinct=True),
                              revised=Count("run_id", distinct=True, filter=Q(revision__gte=2)),
                              revisions=Count("id"), most=Max("revision"))
    if not overall["planned"]:
        return PlanFigures()
    newest, params = plans.order_by("run_id", "-revision").distinct("run_id").values("steps").query.sql_with_params()
    # PostgreSQL unnests each plan's steps (a JSON list); the ORM has no set-returning functions. The plans'
    # query is Django's own, its values passed as parameters: the only text put in the SQL is that query.
    sql = (  # the columns: member, steps, failed, skipped
        "SELECT COALESCE(step->>'member', ''), COUNT(*), COUNT(*) FILTER (WHERE step->>'status' = %s), "  # noqa: S608
        "COUNT(*) FILTER (WHERE step->>'status' = %s) "
        f"FROM ({newest}) AS newest CROSS JOIN LATERAL jsonb_array_elements("
        "CASE WHEN jsonb_typeof(newest.steps) = 'array' THEN newest.steps ELSE '[]'::jsonb END) AS step "
        "GROUP BY 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [AgentPlan.Status.FAILED, AgentPlan.Status.SKIPPED, *params])
        rows = [MemberSteps(member, steps, failed, skipped) for member, steps, failed, skipped in cursor.fetchall()]
    members = sorted((row for row in rows if row.member), key=lambda row: (-row.failed, -row.steps, row.member))
    return PlanFigures(
        planned=overall["planned"], revised=overall["revised"], revisions=overall["revisions"],
        most_revisions=overall["most"] or 0, steps=sum(row.steps for row in rows),
        failed=sum(row.failed for row in rows), skipped=sum(row.skipped for row in rows), members=members[:TOP],
    )


def dashboard_get(query: DashboardQuery) -> Dashboard:
    """The figures for `query`, in the same few queries whatever the range's length (those of containment ride on
    the tools' and the runs' own; spend by person and spec is one, by model another)."""
    runs = runs_in(query).order_by()
    shared = [policy for policy in channel_policies() if policy.dashboard_share is not None]
    runs_by_day: dict[datetime.date, dict[str, int]] = {day: {} for day in query.days}
    tokens_by_day: dict[datetime.date, int] = dict.fromkeys(query.days, 0)
    cost_by_day: dict[datetime.date, Decimal | None] = dict.fromkeys(query.days)
    per_day = runs.annotate(day=TruncDate("created_at")).values("day", "status")
    for row in per_day.annotate(count=Count("id"), tokens=Sum("total_tokens"), spent=Sum("cost")):
        runs_by_day[row["day"]][row["status"]] = row["count"]
        tokens_by_day[row["day"]] += row["tokens"] or 0
        if row["spent"] is not None:
            cost_by_day[row["day"]] = (cost_by_day[row["day"]] or Decimal(0)) + row["spent"]
    overall = runs.aggregate(
        p50=PercentileCont("duration_ms", 0.5), p95=PercentileCont("duration_ms", 0.95),
        up=Count("id", filter=Q(quality_score=1.0)), down=Count("id", filter=Q(quality_score=0.0)),
        none=Count("id", filter=Q(quality_score__isnull=True)),
        members=Count("id", filter=Q(parent__isnull=False)),
        labelled=Count("id", filter=~Q(others_text=[])),
        **{f"channel_{policy.value}": Count("id", filter=Q(channel=policy.value)) for policy in shared},
    )
    tools = _tools_in(runs)

    def top(column: str) -> list[tuple[str, int]]:
        rows = runs.exclude(**{column: ""}).values(column).annotate(count=Count("id"))
        return [(row[column], row["count"]) for row in rows.order_by("-count", column)[:TOP]]

    return Dashboard(
        query=query, runs_by_day=runs_by_day, tokens_by_day=tokens_by_day, p50_ms=overall["p50"],
        p95_ms=overall["p95"], thumbs_up=overall["up"], thumbs_down=overall["down"],
        no_feedback=overall["none"], tools=tools, stop_reasons=top("stop_reason"), errors=top("error"),
        member_runs=overall["members"],
        channel_runs={policy.value: overall[f"channel_{policy.value}"] for policy in shared}, plans=_plans_in(runs),
        containment=_containment_in(overall["labelled"], tools), cost_by_day=cost_by_day, spend=_spend_in(runs),
    )
