"""The dashboard's plans (assistant/plans/), as staff see them: how many runs planned and revised, revisions per
plan, and what became of the plan steps for each member (the newest revision of each plan, as it ended), for the
range, the spec and the runs of a tree asked for; each number a link the run list takes and answers with exactly
the runs behind it; and no query more however many plans there are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from assistant.models import AgentPlan, AgentRun
from tests.review.test_dashboard import DASHBOARD, WEEK, Page, day, in_range, lookups, make_member, make_run, show

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory(is_staff=True, is_superuser=True))
    return client


def asked(n: int, member: str, status: str, why: str = "") -> dict[str, Any]:
    return {"n": n, "do": f"Ask {member}", "tool": f"ask_{member}", "member": member, "member_note": "",
            "status": status, "step_ids": [], "why": why}


def own(n: int, status: str) -> dict[str, Any]:
    return {"n": n, "do": "Do it", "tool": "tracker_task_create", "member": "", "member_note": "", "status": status,
            "step_ids": [], "why": ""}


def plans(run: AgentRun, *revisions: list[dict[str, Any]]) -> None:
    for number, steps in enumerate(revisions, start=1):
        AgentPlan.objects.create(run=run, revision=number, steps=steps, reason="" if number == 1 else "a step failed")


@pytest.fixture
def planned(alice: Any, bob: Any) -> dict[str, AgentRun]:
    """Runs of the week that planned (some revising, one three times), a member's run that planned, a run that
    did not, a run of another spec, and one before the week; each figure below counted by hand. Only the newest
    revision of each plan counts its steps: the older ones are what it replaced."""
    ok1 = make_run(alice, on=day(6))
    plans(ok1, [asked(1, "reader", "done"), asked(2, "writer", "failed", "escalated"), asked(3, "clerk", "pending")],
          [asked(1, "reader", "done"), asked(2, "writer", "failed", "escalated"), asked(3, "writer", "done")])
    ok2 = make_run(alice, on=day(3))
    plans(ok2, [own(1, "done"), asked(2, "reader", "skipped", "The assistant answered without doing this.")])
    failed = make_run(bob, on=day(0), status="failed")
    plans(failed, [asked(1, "reader", "failed")],
          [asked(1, "reader", "failed"), asked(2, "reader", "in_progress")],
          [asked(1, "reader", "failed"), asked(2, "reader", "failed"), asked(3, "clerk", "skipped")])
    lone = make_run(bob, on=day(0))
    member = make_member(ok1, spec="reader")
    plans(member, [own(1, "done")])
    other_spec = make_run(alice, on=day(1), spec="reader")
    plans(other_spec, [asked(1, "writer", "failed")])
    old = make_run(alice, on=day(7))
    plans(old, [asked(1, "reader", "failed"), asked(2, "reader", "failed")])
    return {"ok1": ok1, "ok2": ok2, "failed": failed, "lone": lone, "member": member, "other_spec": other_spec,
            "old": old}


def listed(client: Client, href: str | None) -> set[int]:
    """The runs the run list shows for one of the dashboard's links, taken as it is."""
    assert href is not None
    response = client.get(href)
    assert response.status_code == 200, href
    return {run.pk for run in response.context["cl"].result_list}


def texts(page: Page, table: str) -> dict[str, list[str]]:
    return {label: [text for text, _ in cells] for label, cells in page.rows(table).items()}


def test_the_plans_of_the_range_are_counted_and_each_number_lists_its_runs(
    staff: Client, planned: dict[str, AgentRun]
) -> None:
    page = show(staff, WEEK)
    runs = planned

    # 6 runs in the week; 5 planned, 2 of them revised; 2 + 1 + 3 + 1 + 1 = 8 revisions, 1.6 a plan.
    assert page.figures["figure-runs"][0] == "6"
    assert page.figures["figure-planned"][0] == "5"
    assert page.figures["figure-revised"][0] == "2"
    assert page.figures["figure-revisions"][0] == "1.6"
    assert lookups(page.figures["figure-planned"][1]) == in_range(day(6), day(0), plan="yes")
    assert lookups(page.figures["figure-revised"][1]) == in_range(day(6), day(0), plan="revised")
    assert listed(staff, page.figures["figure-planned"][1]) == {
        runs[name].pk for name in ("ok1", "ok2", "failed", "member", "other_spec")}
    assert listed(staff, page.figures["figure-revised"][1]) == {runs["ok1"].pk, runs["failed"].pk}

    # The steps of the plans followed: 3 + 2 + 3 + 1 + 1, of which 1 + 2 + 1 failed and 1 + 1 were skipped.
    table = page.rows("table-plans")
    assert texts(page, "table-plans") == {
        "Runs that planned": ["5", "83% of runs"],
        "Runs that did not plan": ["1", ""],
        "Plans revised": ["2", "40% of plans"],
        "Revisions in all": ["8", ""],
        "Revisions per plan": ["1.6", ""],
        "Most revisions of one plan": ["3", ""],
        "Plan steps, as each plan ended": ["10", ""],
        "Plan steps failed": ["4", "40% of steps"],
        "Plan steps skipped": ["2", ""],
    }
    assert listed(staff, table["Runs that did not plan"][0][1]) == {runs["lone"].pk}
    assert listed(staff, table["Plan steps failed"][0][1]) == {runs["ok1"].pk, runs["failed"].pk,
                                                               runs["other_spec"].pk}

    # Per member, the most failed first: the reader 4 steps (2 failed, 1 skipped), the writer 3 (2 failed:
    # ok1's in both revisions is one step), the clerk 1 (skipped; ok1's pending clerk step was replaced).
    members = page.rows("table-plan-members")
    assert texts(page, "table-plan-members") == {
        "reader": ["4", "2", "50%", "1"],
        "writer": ["3", "2", "67%", "0"],
        "clerk": ["1", "0", "0%", "1"],
    }
    assert list(members) == ["reader", "writer", "clerk"]
    assert lookups(members["reader"][0][1]) == in_range(day(6), day(0), plan_member="reader")
    assert lookups(members["reader"][1][1]) == in_range(day(6), day(0), plan_member="reader", plan="step_failed")
    assert members["clerk"][1] == ("0", None)
    # Each link lists the runs behind it: a step for the member, and one of those that failed.
    assert listed(staff, members["reader"][0][1]) == {runs["ok1"].pk, runs["ok2"].pk, runs["failed"].pk}
    assert listed(staff, members["reader"][1][1]) == {runs["failed"].pk}
    assert listed(staff, members["writer"][1][1]) == {runs["ok1"].pk, runs["other_spec"].pk}
    assert listed(staff, members["clerk"][0][1]) == {runs["failed"].pk}

    labels = " | ".join(page.svg_labels)
    assert ("Plan steps by member: reader 4 steps, 2 failed (50%); writer 3 steps, 2 failed (67%); "
            "clerk 1 step, 0 failed (0%).") in labels


def test_the_spec_and_the_runs_of_a_tree_asked_for_decide_which_plans_count(
    staff: Client, planned: dict[str, AgentRun]
) -> None:
    default = show(staff, WEEK + "&spec=default")
    assert [default.figures[name][0] for name in ("figure-planned", "figure-revised", "figure-revisions")] == [
        "3", "2", "2.0"]
    assert texts(default, "table-plan-members") == {
        "reader": ["4", "2", "50%", "1"], "writer": ["2", "1", "50%", "0"], "clerk": ["1", "0", "0%", "1"]}
    assert lookups(default.rows("table-plan-members")["writer"][1][1]) == in_range(
        day(6), day(0), spec="default", plan_member="writer", plan="step_failed")
    assert listed(staff, default.rows("table-plan-members")["writer"][1][1]) == {planned["ok1"].pk}

    members = show(staff, WEEK + "&tree=member")
    assert members.figures["figure-planned"][0] == "1" and "figure-revised" not in members.figures
    assert texts(members, "table-plan-members") == {"No plan step was for a member in this range.": []}
    assert texts(members, "table-plans")["Plan steps, as each plan ended"] == ["1", ""]
    assert listed(staff, members.figures["figure-planned"][1]) == {planned["member"].pk}

    top = show(staff, WEEK + "&tree=top")
    assert top.figures["figure-planned"][0] == "4"
    assert texts(top, "table-plans")["Revisions in all"] == ["7", ""]

    # The range: the day before the week brings its run that planned (two failed reader steps).
    fortnight = show(staff, f"?from={day(7).isoformat()}&to={day(0).isoformat()}")
    assert fortnight.figures["figure-planned"][0] == "6"
    assert texts(fortnight, "table-plan-members")["reader"] == ["6", "4", "67%", "1"]


def test_a_range_without_plans_says_so_in_zeros(staff: Client, planned: dict[str, AgentRun]) -> None:
    page = show(staff, "?from=2001-01-01&to=2001-01-03")
    assert [page.figures[name][0] for name in ("figure-planned", "figure-revisions")] == ["0", "—"]
    assert "figure-revised" not in page.figures
    assert texts(page, "table-plans")["Runs that planned"] == ["0", "— of runs"]
    assert texts(page, "table-plans")["Plan steps failed"] == ["0", "— of steps"]
    assert texts(page, "table-plan-members") == {"No plan step was for a member in this range.": []}


def test_a_member_name_a_model_wrote_is_shown_as_text(staff: Client, alice: Any) -> None:
    hostile = '"><script>alert(1)</script>'
    run = make_run(alice, on=day(0))
    plans(run, [asked(1, hostile, "failed")])
    html = staff.get(DASHBOARD).content.decode()
    assert "<script>alert(1)" not in html
    page = Page(html)
    assert texts(page, "table-plan-members")[hostile] == ["1", "1", "100%", "0"]
    assert listed(staff, page.rows("table-plan-members")[hostile][1][1]) == {run.pk}


def test_plans_cost_no_query_more_however_many_there_are(staff: Client, alice: Any,
                                                         planned: dict[str, AgentRun]) -> None:
    with CaptureQueriesContext(connection) as few_queries:
        show(staff, WEEK)
    for number in range(30):
        run = make_run(alice, on=day(number % 7))
        plans(run, *[[asked(n, f"member{n}", "failed") for n in range(1, 6)] for _ in range(1 + number % 3)])
    with CaptureQueriesContext(connection) as many_queries:
        page = show(staff, WEEK)
    assert page.figures["figure-planned"][0] == "35"
    assert len(many_queries) == len(few_queries) <= 12, [query["sql"] for query in many_queries]
    with CaptureQueriesContext(connection) as year_queries:
        show(staff, f"?from={day(365).isoformat()}&to={day(0).isoformat()}")
    assert len(year_queries) == len(few_queries)
