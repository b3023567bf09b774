"""The runs' dashboard in the admin, as staff see it: every figure against runs and steps the test made, each
number a link to the run list filtered to the runs behind it, the date range and the spec filter, bad input
answered with a message and the default range, staff only, an empty range in zeros, and a handful of
queries however long the range."""

from __future__ import annotations

import datetime
import re
import statistics
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from assistant.models import AgentChat, AgentRun, AgentStep

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/assistant/agentrun/dashboard/"
RUN_LIST = "/admin/assistant/agentrun/"
TODAY = timezone.localdate()


def day(offset: int) -> datetime.date:
    """`offset` days before today."""
    return TODAY - datetime.timedelta(days=offset)


def make_run(owner: Any, *, on: datetime.date, status: str = "succeeded", spec: str = "default",
             duration_ms: int | None = 1000, tokens: int = 0, quality: float | None = None,
             stop_reason: str = "", error: str = "", tools: tuple[tuple[str, str], ...] = ()) -> AgentRun:
    """A run created at noon of `on`, with one tool-call step per `(tool, result status)`."""
    chat = AgentChat.objects.create(owner=owner, spec=spec)
    # Filed in its profile, as a run that ended is: otherwise a running worker's sweeper files it during
    # the test, and its writes race the test database's emptying at the end (a deadlock).
    ended = status not in AgentRun.ACTIVE_STATUSES
    run = AgentRun.objects.create(
        owner=owner, chat=chat, spec=spec, status=status, duration_ms=duration_ms, total_tokens=tokens,
        quality_score=quality, stop_reason=stop_reason, error=error,
        profile_recorded_at=timezone.now() if ended else None,
    )
    noon = timezone.make_aware(datetime.datetime.combine(on, datetime.time(12)))
    AgentRun.objects.filter(pk=run.pk).update(created_at=noon)
    for seq, (tool, outcome) in enumerate(tools, start=1):
        AgentStep.objects.create(
            run=run, seq=seq, kind="tool_call", tool_name=tool, result={"status": outcome},
            took_effect=outcome == "done",
        )
    return run


class Page(HTMLParser):
    """The dashboard as read on screen: each table's rows (cells as text and link), the figures, the SVGs."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, str | None]]]] = {}
        self.figures: dict[str, tuple[str, str]] = {}
        self.svg_labels: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._href: str | None = None
        self._figure: tuple[str, str] | None = None
        self._figure_text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and found.get("id"):
            self._table = str(found["id"])
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell, self._href = [], None
        elif tag == "a" and self._cell is not None:
            self._href = found.get("href")
        elif tag == "a" and str(found.get("id", "")).startswith("figure-"):
            self._figure, self._figure_text = (str(found["id"]), str(found["href"])), []
        elif tag == "svg" and "role" in found:
            assert found["role"] == "img"
            self.svg_labels.append(str(found.get("aria-label")))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append(("".join(self._cell).strip(), self._href))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "a" and self._figure:
            self.figures[self._figure[0]] = ("".join(self._figure_text).strip(), self._figure[1])
            self._figure = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._figure:
            self._figure_text.append(data)

    def rows(self, table: str) -> dict[str, list[tuple[str, str | None]]]:
        """A table's body rows by their first cell's text (the header row left out)."""
        return {row[0][0]: row[1:] for row in self.tables[table][1:] if row}


def lookups(href: str | None) -> dict[str, str]:
    """The run list filters a link carries; it must lead to the run list."""
    assert href is not None
    parts = urlsplit(href)
    assert parts.path == reverse("admin:assistant_agentrun_changelist")
    return {key: values[0] for key, values in parse_qs(parts.query).items()}


def in_range(start: datetime.date, end: datetime.date, **more: str) -> dict[str, str]:
    return {"created_at__gte": start.isoformat(),
            "created_at__lt": (end + datetime.timedelta(days=1)).isoformat(), **more}


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory(is_staff=True, is_superuser=True))
    return client


def show(client: Client, query: str = "") -> Page:
    response = client.get(DASHBOARD + query)
    assert response.status_code == 200, response
    return Page(response.content.decode())


@pytest.fixture
def week(alice: Any, bob: Any) -> dict[str, Any]:
    """Nine runs over the last week and two outside it: a mix of outcomes, durations, tokens, feedback,
    stop reasons, errors and tool calls, each figure below counted by hand."""
    runs = {
        "ok1": make_run(alice, on=day(6), duration_ms=1000, tokens=100, quality=1.0,
                        tools=(("list_tasks", "data"), ("create_task", "done"))),
        "ok2": make_run(alice, on=day(6), duration_ms=2000, tokens=200, quality=1.0,
                        tools=(("create_task", "done"), ("create_task", "invalid"), ("create_task", "done"))),
        "ok3": make_run(bob, on=day(3), duration_ms=3000, tokens=300, quality=0.0,
                        tools=(("list_tasks", "data"),)),
        "ok4": make_run(bob, on=day(0), duration_ms=4000, tokens=400, tools=(("delete_project", "denied"),)),
        "failed": make_run(alice, on=day(3), status="failed", duration_ms=5000, tokens=50,
                           stop_reason="model_error", error="provider unreachable",
                           tools=(("create_task", "error"),)),
        "failed2": make_run(bob, on=day(0), status="failed", duration_ms=6000, tokens=0,
                            stop_reason="model_error", error="provider unreachable"),
        "timed_out": make_run(alice, on=day(0), status="timed_out", duration_ms=120_000, tokens=999,
                              stop_reason="wall_time"),
        "cancelled": make_run(bob, on=day(6), status="cancelled", duration_ms=10_000, quality=0.0,
                              stop_reason="cancelled", tools=(("delete_project", "declined"),)),
        "running": make_run(alice, on=day(0), status="running", duration_ms=None, tokens=7),
        # Outside the week, and of another spec in it: counted only when asked for.
        "old": make_run(alice, on=day(7), tokens=10_000, tools=(("list_tasks", "error"),)),
        "other_spec": make_run(alice, on=day(1), spec="reader", duration_ms=50, tokens=5),
    }
    return runs


WEEK = f"?from={day(6).isoformat()}&to={day(0).isoformat()}"


def test_every_figure_matches_the_runs_and_steps_behind_it(staff: Client, week: dict[str, Any]) -> None:
    page = show(staff, WEEK + "&spec=default")
    start, end = day(6), day(0)
    span = {"created_at__gte": start.isoformat(), "created_at__lt": (end + datetime.timedelta(days=1)).isoformat(),
            "spec": "default"}

    # The figures on top: 9 runs; 4 succeeded of 8 ended; durations of the 8 ended runs; tokens; feedback.
    durations = [1000, 2000, 3000, 4000, 5000, 6000, 120_000, 10_000]
    p50 = statistics.quantiles(durations, n=100, method="inclusive")[49]
    p95 = statistics.quantiles(durations, n=100, method="inclusive")[94]
    assert page.figures["figure-runs"] == ("9", page.figures["figure-runs"][1])
    assert lookups(page.figures["figure-runs"][1]) == span
    assert page.figures["figure-success"][0] == "50%"
    assert lookups(page.figures["figure-success"][1]) == {**span, "status": "succeeded"}
    assert page.figures["figure-p50"][0] == f"{p50:,.0f} ms" == "4,500 ms"
    assert page.figures["figure-p95"][0] == f"{p95 / 1000:,.1f} s" == "81.5 s"
    assert page.figures["figure-tokens"][0] == f"{100 + 200 + 300 + 400 + 50 + 999 + 7:,}" == "2,056"
    # 2 up, 2 down: half of the rated runs up; 4 of 9 runs rated.
    assert page.figures["figure-up-share"][0] == "50%"
    assert lookups(page.figures["figure-up-share"][1]) == {**span, "quality_score": "1.0"}

    # Runs per day by outcome: every day of the range, each count a link to that day's runs of that status.
    runs = page.rows("table-runs")
    assert list(runs) == [day(offset).isoformat() for offset in range(6, -1, -1)]
    header = [cell for cell, _ in page.tables["table-runs"][0]]
    assert header == ["Day", "Runs", "Succeeded", "Failed", "Timed out", "Cancelled", "Running"]
    counts = {label: [int(text) for text, _ in cells] for label, cells in runs.items()}
    assert counts[day(6).isoformat()] == [3, 2, 0, 0, 1, 0]
    assert counts[day(3).isoformat()] == [2, 1, 1, 0, 0, 0]
    assert counts[day(0).isoformat()] == [4, 1, 1, 1, 0, 1]
    assert counts[day(1).isoformat()] == [0, 0, 0, 0, 0, 0]
    today_cells = runs[day(0).isoformat()]
    assert lookups(today_cells[0][1]) == {**in_range(end, end), "spec": "default"}
    assert lookups(today_cells[3][1]) == {**in_range(end, end), "spec": "default", "status": "timed_out"}

    # Tokens per day.
    tokens = {label: cells[0][0] for label, cells in page.rows("table-tokens").items()}
    assert tokens[day(6).isoformat()] == "300"
    assert tokens[day(3).isoformat()] == "350"
    assert tokens[day(0).isoformat()] == f"{400 + 0 + 999 + 7:,}" == "1,406"

    # Tools most used: calls, runs, failed calls (invalid, error, denied, declined count; data and done do not).
    used = {name: [text for text, _ in cells] for name, cells in page.rows("table-tools").items()}
    assert used == {
        "create_task": ["5", "2", "40%"],
        "list_tasks": ["2", "0", "0%"],
        "delete_project": ["2", "2", "100%"],
    }
    assert list(used) == ["create_task", "delete_project", "list_tasks"]
    calls_link, failed_link, _ = page.rows("table-tools")["create_task"]
    assert lookups(calls_link[1]) == {**span, "steps__kind": "tool_call", "steps__tool_name": "create_task"}
    failed = "declined,denied,error,escalated,invalid,member_stopped,not_found,not_run,refused,unknown"
    assert lookups(failed_link[1]) == {**span, "steps__kind": "tool_call", "steps__tool_name": "create_task",
                                       "steps__result__status__in": failed}
    # No failed call, no link.
    assert page.rows("table-tools")["list_tasks"][1] == ("0", None)

    # Tools failing most: most failed calls first (the higher rate first among equals), with the rate.
    failing = {name: [text for text, _ in cells] for name, cells in page.rows("table-failing").items()}
    assert list(failing) == ["delete_project", "create_task"]
    assert failing == {"delete_project": ["2", "2", "100%"], "create_task": ["2", "5", "40%"]}

    # Stop reasons and errors, most frequent first.
    stops = {reason: cells[0] for reason, cells in page.rows("table-stops").items()}
    assert {reason: text for reason, (text, _) in stops.items()} == {"model_error": "2", "cancelled": "1",
                                                                      "wall_time": "1"}
    assert list(stops) == ["model_error", "cancelled", "wall_time"]
    assert lookups(stops["wall_time"][1]) == {**span, "stop_reason": "wall_time"}
    errors = page.rows("table-errors")
    assert {error: cells[0][0] for error, cells in errors.items()} == {"provider unreachable": "2"}
    assert lookups(errors["provider unreachable"][0][1]) == {**span, "error": "provider unreachable"}

    # Feedback: counts and the share of rated runs that were thumbs up.
    feedback = page.rows("table-feedback")
    assert {name: cells[0][0] for name, cells in feedback.items()} == {
        "Thumbs up": "2", "Thumbs down": "2", "No feedback": "5", "Thumbs up among rated runs": "50%"}
    assert lookups(feedback["Thumbs down"][0][1]) == {**span, "quality_score": "0.0"}
    assert lookups(feedback["No feedback"][0][1]) == {**span, "quality_score__isnull": "True"}

    # The charts say their numbers to a screen reader.
    labels = " | ".join(page.svg_labels)
    assert len(page.svg_labels) == 8
    assert "9 runs; 4 succeeded, 2 failed, 1 timed out, 1 cancelled, 1 running." in labels
    assert "2,056 tokens in all" in labels
    assert "create_task 5 calls, 2 failed (40%)" in labels
    assert "delete_project 2 of 2 calls failed (100%)" in labels
    assert "model_error 2" in labels
    assert "2 thumbs up, 2 thumbs down, 5 without feedback; 50% of rated runs up." in labels
    assert "Plan steps by member: none." in labels  # no run of the week planned


def test_every_spec_is_counted_unless_one_is_asked_for(staff: Client, week: dict[str, Any]) -> None:
    every = show(staff, WEEK)
    assert every.figures["figure-runs"][0] == "10"
    assert every.rows("table-runs")[day(1).isoformat()][0][0] == "1"
    assert "spec" not in lookups(every.figures["figure-runs"][1])
    reader = show(staff, WEEK + "&spec=reader")
    assert reader.figures["figure-runs"][0] == "1"
    assert reader.figures["figure-tokens"][0] == "5"
    assert reader.figures["figure-p50"][0] == "50 ms"
    assert lookups(reader.figures["figure-runs"][1])["spec"] == "reader"


def test_the_range_decides_which_days_count(staff: Client, week: dict[str, Any]) -> None:
    # The default is the last 14 days, today included: the old run (7 days ago) is in it.
    default = show(staff)
    assert list(default.rows("table-runs")) == [day(offset).isoformat() for offset in range(13, -1, -1)]
    assert default.figures["figure-runs"][0] == "11"
    assert default.figures["figure-tokens"][0] == f"{2056 + 10_000 + 5:,}" == "12,061"
    assert [text for text, _ in default.rows("table-tools")["list_tasks"]] == ["3", "1", "33%"]
    # One day only.
    one = show(staff, f"?from={day(7).isoformat()}&to={day(7).isoformat()}")
    assert one.figures["figure-runs"][0] == "1"
    assert list(one.rows("table-tools")) == ["list_tasks"]
    assert lookups(one.figures["figure-runs"][1]) == in_range(day(7), day(7))


def test_an_empty_range_shows_zeros(staff: Client, week: dict[str, Any]) -> None:
    page = show(staff, "?from=2001-01-01&to=2001-01-03")
    assert page.figures["figure-runs"][0] == "0"
    assert [page.figures[name][0] for name in ("figure-success", "figure-p50", "figure-p95", "figure-up-share")] \
        == ["—", "—", "—", "—"]
    assert page.figures["figure-tokens"][0] == "0"
    assert {label: [text for text, _ in cells] for label, cells in page.rows("table-runs").items()} == {
        f"2001-01-0{n}": ["0", "0", "0", "0", "0"] for n in (1, 2, 3)}
    assert page.rows("table-tools") == {"No tool calls in this range.": []}
    assert page.rows("table-stops") == {"No run stopped early in this range.": []}
    assert {name: cells[0][0] for name, cells in page.rows("table-feedback").items()} == {
        "Thumbs up": "0", "Thumbs down": "0", "No feedback": "0", "Thumbs up among rated runs": "—"}


@pytest.mark.parametrize(("query", "message"), [
    ("?from=yesterday", "“yesterday” is not a date (YYYY-MM-DD)"),
    ("?from=2026-02-30", "“2026-02-30” is not a date (YYYY-MM-DD)"),
    ("?to=20261130", "“20261130” is not a date (YYYY-MM-DD)"),
    ("?from=2026-03-02&to=2026-03-01", "The range ends (2026-03-01) before it starts (2026-03-02)"),
    ("?from=2020-01-01&to=2026-01-01", "The range is longer than 366 days"),
    ("?spec=%3Cscript%3E", "No run has the spec “&lt;script&gt;”: showing every spec."),
])
def test_bad_input_says_what_was_wrong_and_shows_the_default(staff: Client, week: dict[str, Any], query: str,
                                                            message: str) -> None:
    response = staff.get(DASHBOARD + query)
    assert response.status_code == 200
    html = response.content.decode()
    assert message in html
    assert "<script>" not in html
    page = Page(html)
    assert list(page.rows("table-runs")) == [day(offset).isoformat() for offset in range(13, -1, -1)]
    assert page.figures["figure-runs"][0] == "11"


def test_only_staff_who_may_view_runs_see_it(client: Client, user_factory: Callable[..., Any],
                                             week: dict[str, Any]) -> None:
    anonymous = client.get(DASHBOARD)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("admin:login"))

    person = Client()
    person.force_login(user_factory())
    refused = person.get(DASHBOARD)
    assert refused.status_code == 302 and refused["Location"].startswith(reverse("admin:login"))

    staff_without_permission = Client()
    staff_without_permission.force_login(user_factory(is_staff=True))
    assert staff_without_permission.get(DASHBOARD).status_code == 403

    viewer = user_factory(is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agentrun"))
    reader = Client()
    reader.force_login(viewer)
    assert reader.get(DASHBOARD).status_code == 200


def test_the_run_list_and_the_admin_index_link_to_it(staff: Client) -> None:
    url = reverse("admin:assistant_agentrun_dashboard")
    assert url == DASHBOARD
    run_list = staff.get(RUN_LIST).content.decode()
    assert len(re.findall(rf'<a href="{re.escape(url)}"[^>]*>Dashboard</a>', run_list)) == 1
    index = staff.get(reverse("admin:index")).content.decode()
    assert re.search(rf'<a href="{re.escape(url)}"[^>]*>Assistant dashboard</a>', index)


def test_a_year_of_days_costs_the_same_handful_of_queries(staff: Client, week: dict[str, Any]) -> None:
    with CaptureQueriesContext(connection) as week_queries:
        show(staff, WEEK)
    with CaptureQueriesContext(connection) as year_queries:
        show(staff, f"?from={day(365).isoformat()}&to={day(0).isoformat()}")
    assert len(year_queries) == len(week_queries) <= 12, [query["sql"] for query in year_queries]


def test_names_and_errors_a_model_or_a_view_wrote_are_shown_as_text(staff: Client, alice: Any) -> None:
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    short = "<b onclick=alert(3)>x</b>"  # a stop reason is at most 40 characters
    make_run(alice, on=TODAY, status="failed", stop_reason=short, error=hostile, tools=((hostile, "error"),))
    html = staff.get(DASHBOARD).content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html and "<b onclick" not in html
    page = Page(html)
    assert page.rows("table-errors")[hostile][0][0] == "1"
    assert page.rows("table-stops")[short][0][0] == "1"
    assert lookups(page.rows("table-failing")[hostile][0][1])["steps__tool_name"] == hostile
    assert any(hostile[:20] in label for label in page.svg_labels)


def test_days_are_the_sites_days(staff: Client, alice: Any, settings: Any) -> None:
    """A run made at 02:00 UTC is on the day before in New York: the chart, the table and the link agree."""
    settings.TIME_ZONE = "America/New_York"
    chat = AgentChat.objects.create(owner=alice)
    run = AgentRun.objects.create(owner=alice, chat=chat, status="succeeded", duration_ms=10)
    early = datetime.datetime(2026, 3, 10, 2, 0, tzinfo=datetime.UTC)
    AgentRun.objects.filter(pk=run.pk).update(created_at=early)
    page = show(staff, "?from=2026-03-09&to=2026-03-10")
    runs = page.rows("table-runs")
    assert [runs["2026-03-09"][0][0], runs["2026-03-10"][0][0]] == ["1", "0"]
    assert lookups(runs["2026-03-09"][0][1]) == in_range(datetime.date(2026, 3, 9), datetime.date(2026, 3, 9))


def make_member(parent: AgentRun, *, spec: str, status: str = "succeeded", tokens: int = 0,
                duration_ms: int | None = 1000, tools: tuple[tuple[str, str], ...] = ()) -> AgentRun:
    """A member's run `parent` asked, made the same day as it, with its own tokens (a run's are its own only)."""
    run = AgentRun.objects.create(
        owner=parent.owner, chat=parent.chat, spec=spec, status=status, total_tokens=tokens, duration_ms=duration_ms,
        parent=parent, root_id=parent.root_id or parent.pk, depth=parent.depth + 1, task="Have a look.",
    )
    AgentRun.objects.filter(pk=run.pk).update(created_at=AgentRun.objects.get(pk=parent.pk).created_at)
    for seq, (tool, outcome) in enumerate(tools, start=1):
        AgentStep.objects.create(run=run, seq=seq, kind="tool_call", tool_name=tool, result={"status": outcome},
                                 took_effect=outcome == "done")
    return run


@pytest.fixture
def trees(alice: Any, bob: Any) -> dict[str, AgentRun]:
    """Two top runs that asked members (one still waiting for its member), and a run that asked nobody."""
    top = make_run(alice, on=day(1), tokens=100, tools=(("ask_reader", "answered"), ("ask_writer", "escalated")))
    reader = make_member(top, spec="reader", tokens=40, tools=(("list_tasks", "data"),))
    writer = make_member(top, spec="writer", status="failed", tokens=25, tools=(("create_task", "invalid"),))
    checker = make_member(writer, spec="reader", tokens=5)
    waiting = make_run(bob, on=day(0), status="awaiting_members", duration_ms=None, tokens=0)
    working = make_member(waiting, spec="reader", status="running", duration_ms=None, tokens=0)
    lone = make_run(bob, on=day(0), tokens=10)
    return {"top": top, "reader": reader, "writer": writer, "checker": checker, "waiting": waiting,
            "working": working, "lone": lone}


def test_top_runs_and_members_runs_are_told_apart_and_filtered(staff: Client, trees: dict[str, AgentRun]) -> None:
    every = show(staff, WEEK)
    assert every.figures["figure-runs"][0] == "7"
    assert every.figures["figure-member-runs"][0] == "4"
    assert lookups(every.figures["figure-member-runs"][1]) == in_range(day(6), day(0), tree="member")
    # Each run's tokens are its own: all of them add up to the trees' totals, nothing counted twice.
    assert every.figures["figure-tokens"][0] == f"{100 + 40 + 25 + 5 + 10}"
    # A run waiting for its members has a column of its own, in words.
    header = [cell for cell, _ in every.tables["table-runs"][0]]
    assert header == ["Day", "Runs", "Succeeded", "Failed", "Timed out", "Cancelled", "Running", "Awaiting members"]
    assert [text for text, _ in every.rows("table-runs")[day(0).isoformat()]] == ["3", "1", "0", "0", "0", "1", "1"]
    assert lookups(every.rows("table-runs")[day(0).isoformat()][6][1]) == in_range(
        day(0), day(0), status="awaiting_members")
    assert "1 running, 1 awaiting members." in " | ".join(every.svg_labels)

    top = show(staff, WEEK + "&tree=top")
    assert top.figures["figure-runs"][0] == "3" and "figure-member-runs" not in top.figures
    assert top.figures["figure-tokens"][0] == "110"
    assert lookups(top.figures["figure-runs"][1]) == in_range(day(6), day(0), tree="top")
    # Every link carries the choice, the tools' and the days' too.
    assert lookups(top.rows("table-tools")["ask_writer"][1][1])["tree"] == "top"
    assert lookups(top.rows("table-runs")[day(1).isoformat()][0][1]) == in_range(day(1), day(1), tree="top")
    assert "list_tasks" not in top.rows("table-tools")

    members = show(staff, WEEK + "&tree=member&spec=reader")
    assert members.figures["figure-runs"][0] == "3"
    assert members.figures["figure-tokens"][0] == "45"
    assert list(members.rows("table-tools")) == ["list_tasks"]
    link = members.figures["figure-runs"][1]
    assert lookups(link) == in_range(day(6), day(0), tree="member", spec="reader")
    # The run list takes the link as it is, and lists exactly those runs.
    response = staff.get(link)
    assert response.status_code == 200
    assert {run.pk for run in response.context["cl"].result_list} == {
        trees["reader"].pk, trees["checker"].pk, trees["working"].pk}

    # The form shows the choice made.
    html = staff.get(DASHBOARD + WEEK + "&tree=member").content.decode()
    assert '<option value="member" selected>Members&#x27; runs</option>' in html


def test_a_choice_of_runs_it_does_not_know_is_said_and_all_runs_shown(staff: Client,
                                                                     trees: dict[str, AgentRun]) -> None:
    response = staff.get(DASHBOARD + WEEK + "&tree=%3Cb%3Esideways")
    html = response.content.decode()
    assert response.status_code == 200
    assert "“&lt;b&gt;sideways” is not a choice of runs (top or member): showing all runs." in html
    page = Page(html)
    assert page.figures["figure-runs"][0] == "7"
    assert "tree" not in lookups(page.figures["figure-runs"][1])


def test_choosing_top_runs_or_members_costs_no_more_queries(staff: Client, trees: dict[str, AgentRun]) -> None:
    with CaptureQueriesContext(connection) as all_queries:
        show(staff, WEEK)
    with CaptureQueriesContext(connection) as member_queries:
        show(staff, WEEK + "&tree=member&spec=reader")
    assert len(member_queries) == len(all_queries) <= 12, [query["sql"] for query in member_queries]
