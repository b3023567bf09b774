"""Staff reviewing a run that handed work to members (assistant/society/), through the real admin: each member's
run under the step that asked it, linked, with its own status, stop reason, figures and steps; the run's own
figures beside its tree's totals; a member's page linking up; the run list telling top runs from members'
and filtering by both; and a page whose queries do not grow with the tree. The trees are rows made here."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from assistant.models import AgentRun, AgentStep
from tests.review.test_admin_runs import RUNS, _csv, a_run, listed, step, timeline_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    return client


def page_of(run: AgentRun) -> str:
    return reverse("admin:assistant_agentrun_change", args=[run.pk])


def member_of(parent: AgentRun, asked_in: AgentStep | None, spec: str, task: str, *, at_ms: int,
              **fields: Any) -> AgentRun:
    """A member's run that `parent` asked in its step `asked_in`, started `at_ms` after the parent."""
    fields.setdefault("status", AgentRun.Status.SUCCEEDED)
    started = parent.started_at + timedelta(milliseconds=at_ms)
    if fields.get("duration_ms") is not None:
        fields.setdefault("finished_at", started + timedelta(milliseconds=fields["duration_ms"]))
    return AgentRun.objects.create(owner=parent.owner, chat=parent.chat, spec=spec, parent=parent,
                                   root_id=parent.root_id or parent.pk, depth=parent.depth + 1, task=task,
                                   asked_in=asked_in, started_at=started, **fields)


def answered(member: str, answer: str, *, took_effect: bool | None = False) -> dict[str, Any]:
    return {"status": "answered", "member": member, "answer": answer, "took_effect": took_effect,
            "used": {"model_calls": 1, "tool_calls": 1, "tokens": 100}}


def ended_tree(owner: Any) -> dict[str, AgentRun]:
    """A top run that asked two members, one of which asked a third: every run ended, its own counters set
    (as `run_finish` sets them: its own steps only)."""
    started = timezone.now() - timedelta(seconds=30)
    top = a_run(owner, "Plan my week", reply="Your week is planned.", started_at=started,
                finished_at=started + timedelta(seconds=10), duration_ms=10_000, model_calls=2, tool_calls=2,
                tool_errors=1, prompt_tokens=500, completion_tokens=50, total_tokens=550)
    step(top, 1, "model_call", at_ms=500, duration_ms=500, prompt_tokens=300, completion_tokens=30,
         result={"text": "", "tool_calls": [{"name": "ask_reader"}, {"name": "ask_writer"}]})
    ask_reader = step(top, 2, "tool_call", at_ms=600, duration_ms=3800, tool_name="ask_reader",
                      arguments={"task": "List my open tasks."}, took_effect=False,
                      result=answered("reader", "Three open tasks."))
    escalation = "The member “writer” could not finish: it reached its limit of tool calls."
    ask_writer = step(top, 3, "tool_call", at_ms=4500, duration_ms=3000, tool_name="ask_writer",
                      arguments={"task": "Add a task “Plan”."}, took_effect=None, reason=escalation,
                      result={"status": "escalated", "member": "writer", "reason": escalation, "took_effect": None,
                              "stop_reason": "max_tool_calls"})
    step(top, 4, "model_call", at_ms=9500, duration_ms=500, prompt_tokens=200, completion_tokens=20,
         result={"text": "Your week is planned.", "tool_calls": []})

    reader = member_of(top, ask_reader, "reader", "List my open tasks.", at_ms=650, duration_ms=3700,
                       reply="Three open tasks.", model_calls=2, tool_calls=1, prompt_tokens=200,
                       completion_tokens=40, total_tokens=240)
    step(reader, 1, "model_call", at_ms=400, duration_ms=400, prompt_tokens=100, completion_tokens=20,
         result={"text": "", "tool_calls": [{"name": "tracker_task_list"}]})
    step(reader, 2, "tool_call", at_ms=450, duration_ms=100, tool_name="tracker_task_list", took_effect=False,
         result={"status": "data", "took_effect": False, "data": {"results": []}})
    step(reader, 3, "model_call", at_ms=3600, duration_ms=300, prompt_tokens=100, completion_tokens=20,
         result={"text": "Three open tasks.", "tool_calls": []})

    writer = member_of(top, ask_writer, "writer", "Add a task “Plan”.", at_ms=4600, duration_ms=2900,
                       status=AgentRun.Status.FAILED, stop_reason="max_tool_calls",
                       error="The assistant reached its limit of tool calls.", model_calls=1, tool_calls=2,
                       tool_errors=1, prompt_tokens=90, completion_tokens=9, total_tokens=99)
    step(writer, 1, "model_call", at_ms=300, duration_ms=300, prompt_tokens=90, completion_tokens=9,
         result={"text": "", "tool_calls": [{"name": "ask_checker"}, {"name": "tracker_task_create"}]})
    ask_checker = step(writer, 2, "tool_call", at_ms=350, duration_ms=900, tool_name="ask_checker",
                       arguments={"task": "Is “Plan” a duplicate?"}, took_effect=False,
                       result=answered("checker", "No duplicate."))
    step(writer, 3, "tool_call", at_ms=1300, duration_ms=80, tool_name="tracker_task_create",
         arguments={"title": ""}, took_effect=False, reason="the form has errors",
         result={"status": "invalid", "took_effect": False, "reason": "the form has errors"})

    checker = member_of(writer, ask_checker, "checker", "Is “Plan” a duplicate?", at_ms=400, duration_ms=800,
                        reply="No duplicate.", model_calls=1, tool_calls=0, prompt_tokens=50, completion_tokens=10,
                        total_tokens=60)
    step(checker, 1, "model_call", at_ms=700, duration_ms=700, prompt_tokens=50, completion_tokens=10,
         result={"text": "No duplicate.", "tool_calls": []})
    return {"top": top, "reader": reader, "writer": writer, "checker": checker}


def section(body: str, css_class: str) -> str:
    """The content of the `<dd>` with this class."""
    return body.split(f'class="{css_class}"')[1].split("</dd>")[0]


def member_block(body: str, run: AgentRun) -> str:
    """A member's block up to the first step table or nested member inside it: its head, figures and task."""
    return body.split(f'id="member-{run.pk}"')[1].split("<details")[0]


def test_a_top_runs_page_shows_each_member_under_the_step_that_asked_it(staff: Client, alice: Any) -> None:
    tree = ended_tree(alice)
    top, reader, writer, checker = tree["top"], tree["reader"], tree["writer"], tree["checker"]

    body = staff.get(page_of(top)).content.decode()

    # The page's own steps are 1 to 4; each member's steps are in its block, with ids of their own.
    assert list(timeline_rows(body)) == ["1", "2", "3", "4"]
    order = ['id="step-2"', f'id="member-{reader.pk}"', f'id="run-{reader.pk}-step-3"', 'id="step-3"',
             f'id="member-{writer.pk}"', f'id="run-{writer.pk}-step-2"', f'id="member-{checker.pk}"',
             f'id="run-{checker.pk}-step-1"', f'id="run-{writer.pk}-step-3"', 'id="step-4"']
    positions = [body.index(marker) for marker in order]
    assert positions == sorted(positions), dict(zip(order, positions, strict=True))
    assert f'class="timeline-member timeline-member-level-2" id="member-{checker.pk}"' in body

    # Each member: linked to its own page, named, its task, its status and its own stop reason and figures.
    head = member_block(body, reader)
    assert f'href="{page_of(reader)}">Run {reader.pk}</a>' in head
    assert "member <strong>reader</strong>" in head and ">Succeeded<" in head and "List my open tasks." in head
    assert "2 model calls · 1 tool call (0 failed) · 240 tokens · 3,700 ms" in head
    assert "stopped:" not in head
    head = member_block(body, writer)
    assert f'href="{page_of(writer)}">Run {writer.pk}</a>' in head and ">Failed<" in head
    assert 'stopped: <code>max_tool_calls</code>' in head
    assert "The assistant reached its limit of tool calls." in head
    assert "1 model call · 2 tool calls (1 failed) · 99 tokens · 2,900 ms" in head
    head = member_block(body, checker)
    assert f'href="{page_of(checker)}">Run {checker.pk}</a>' in head and "Is “Plan” a duplicate?" in head

    # The delegation steps read as their members' answers.
    rows = timeline_rows(body)
    assert 'data-effect="answered"' in rows["2"] and "Three open tasks." in rows["2"]
    assert 'data-effect="escalated"' in rows["3"] and "could not finish: it reached its limit" in rows["3"]

    # The run's own figures, and the tree's totals beside them: each the sum of the four runs' own.
    summary = body.split('id="run-timeline"')[0]
    assert "550 (500 in, 50 out)" in summary  # its own tokens
    totals = section(body, "run-tree-totals")
    assert "the whole tree: this run and its 3 member runs" in totals
    assert f'{550 + 240 + 99 + 60}</span> tokens (840 in, 109 out) — this run’s own: 550' in totals
    assert f'{2 + 2 + 1 + 1}</span> model calls — own: 2' in totals
    assert f'{2 + 1 + 2 + 0}</span> tool calls (2 failed) — own: 2 (1 failed)' in totals
    assert '10,000 ms</span> from this run’s start to its end' in totals
    assert f'{3700 + 2900 + 800:,} ms</span> added up' in totals
    # The list of members asked, each linked.
    members = section(body, "run-members")
    assert f'run {reader.pk}</a>: reader · Succeeded · 3,700 ms · 240 tokens' in members
    assert f'run {writer.pk}</a>: writer · Failed (<code>max_tool_calls</code>) · 2,900 ms · 99 tokens' in members
    assert checker.pk not in [int(pk) for pk in re.findall(r"run (\d+)</a>", members)]


def test_a_members_page_links_up_to_the_run_that_asked_it_and_its_top_run(staff: Client, alice: Any) -> None:
    tree = ended_tree(alice)
    top, writer, checker = tree["top"], tree["writer"], tree["checker"]

    body = staff.get(page_of(writer)).content.decode()
    asked_by = section(body, "run-asked-by")
    assert f'<a href="{page_of(top)}">run {top.pk}</a> (default), 1 level below' in asked_by
    assert f'in its step <a href="{page_of(top)}#step-3">#3</a> (<code>ask_writer</code>)' in asked_by
    assert "Its task (from the run that asked it)" in body and "Add a task “Plan”." in body
    # Its own steps are the page's; the member it asked is under the step that asked it, with the totals of both.
    assert list(timeline_rows(body)) == ["1", "2", "3"]
    assert body.index('id="step-2"') < body.index(f'id="member-{checker.pk}"') < body.index('id="step-3"')
    totals = section(body, "run-tree-totals")
    assert "this run and the 1 run below it" in totals and "159</span> tokens" in totals

    body = staff.get(page_of(checker)).content.decode()
    asked_by = section(body, "run-asked-by")
    assert f'<a href="{page_of(writer)}">run {writer.pk}</a> (writer), 2 levels below' in asked_by
    assert f'<a href="{page_of(top)}">its top run {top.pk}</a> (default)' in asked_by
    assert f'href="{page_of(writer)}#step-2"' in asked_by
    assert "run-tree-totals" not in body  # it asked nobody


def test_an_active_tree_is_pending_and_its_waiting_step_says_so(staff: Client, alice: Any) -> None:
    started = timezone.now() - timedelta(seconds=5)
    top = a_run(alice, "Tidy my projects", status=AgentRun.Status.AWAITING_MEMBERS, started_at=started)
    step(top, 1, "model_call", at_ms=300, duration_ms=300, prompt_tokens=100, completion_tokens=10,
         result={"text": "", "tool_calls": [{"name": "ask_reader"}]})
    ask = step(top, 2, "tool_call", at_ms=350, tool_name="ask_reader", state="started",
               arguments={"task": "Which projects are empty?"})
    member = member_of(top, ask, "reader", "Which projects are empty?", at_ms=400, status="running")
    AgentStep.objects.filter(pk=ask.pk).update(result={"status": "asked", "member": "reader",
                                                       "child_run_id": member.pk})
    step(member, 1, "model_call", at_ms=500, duration_ms=500, prompt_tokens=40, completion_tokens=4,
         result={"text": "", "tool_calls": [{"name": "tracker_project_list"}]})

    body = staff.get(page_of(top)).content.decode()

    assert '<span class="run-status run-status-awaiting_members">Awaiting Members</span>' in body
    rows = timeline_rows(body)
    assert 'data-effect="waiting-member"' in rows["2"] and "waiting for its member" in rows["2"]
    assert "asked, no answer yet" not in rows["2"]
    head = member_block(body, member)
    assert ">Running<" in head and "44 tokens" in head and "pending" in head
    totals = section(body, "run-tree-totals")
    assert "so far, <em>pending</em>" in totals and "154</span> tokens" in totals and "2</span> model calls" in totals

    # In the run list: its status in words, its counts pending, and both filters find it.
    listing = staff.get(RUNS).content.decode()
    assert '<td class="field-outcome">awaiting members</td>' in listing
    assert listed(staff, "?status=awaiting_members") == [top.pk]
    assert listed(staff, "?tree=top&status=awaiting_members") == [top.pk]
    assert listed(staff, "?tree=member&status=running") == [member.pk]


def test_the_run_list_tells_top_runs_from_members_and_filters_by_both(staff: Client, alice: Any, bob: Any) -> None:
    tree = ended_tree(alice)
    top, reader, writer, checker = tree["top"], tree["reader"], tree["writer"], tree["checker"]
    lone = a_run(bob, "what is due?", spec="reader")

    response = staff.get(RUNS)
    cells = dict(re.findall(r'/admin/assistant/agentrun/(\d+)/change/.*?<td class="field-place">(.*?)</td>',
                            response.content.decode(), flags=re.S))
    assert cells[str(top.pk)] == cells[str(lone.pk)] == "top"
    assert cells[str(reader.pk)] == f'member of <a href="{page_of(top)}">#{top.pk}</a>'
    assert cells[str(checker.pk)] == (f'member of <a href="{page_of(writer)}">#{writer.pk}</a> '
                                      f'(top <a href="{page_of(top)}">#{top.pk}</a>)')

    assert set(listed(staff, "?tree=top")) == {top.pk, lone.pk}
    assert set(listed(staff, "?tree=member")) == {reader.pk, writer.pk, checker.pk}
    assert set(listed(staff, "?spec=reader")) == {reader.pk, lone.pk}
    assert listed(staff, "?spec=reader&tree=member") == [reader.pk]
    assert listed(staff, "?spec=reader&tree=top") == [lone.pk]
    assert listed(staff, "?tree=member&stop_reason=max_tool_calls") == [writer.pk]
    # The sidebar offers both, and the new status among the statuses.
    page = response.content.decode()
    assert "by place in its tree" in page.lower() and "by spec" in page.lower()
    assert "?status=awaiting_members" in page and "?tree=member" in page
    # A value the filter cannot read is said, and the list shown without its filters; another lookup is a 400.
    refused = staff.get(RUNS + "?tree=sideways")
    assert refused.status_code == 302 and refused["Location"].endswith("?e=1")
    assert staff.get(RUNS + "?parent__isnull=False").status_code == 400
    assert staff.get(RUNS + "?depth__gte=1").status_code == 400

    # The CSV says where each run is in its tree, and a member's question is its task.
    rows = {int(row["id"]): row for row in _csv(staff.post(RUNS, {
        "action": "export_csv", "index": "0", "_selected_action": [top.pk, checker.pk]}))}
    assert (rows[top.pk]["parent_id"], rows[top.pk]["root_id"], rows[top.pk]["depth"]) == ("", "", "0")
    assert (rows[checker.pk]["parent_id"], rows[checker.pk]["root_id"], rows[checker.pk]["depth"]) == (
        str(writer.pk), str(top.pk), "2")
    assert rows[checker.pk]["question"] == "Is “Plan” a duplicate?" and rows[top.pk]["question"] == "Plan my week"


def test_a_trees_page_costs_the_same_queries_however_many_members_it_has(staff: Client, alice: Any) -> None:
    small = ended_tree(alice)["top"]
    big = ended_tree(alice)
    # Five more members of the big tree's top run, each with steps and a member of its own.
    for number in range(5):
        ask = step(big["top"], 10 + number, "tool_call", at_ms=100, duration_ms=50, tool_name="ask_reader",
                   took_effect=False, result=answered("reader", f"answer {number}"))
        member = member_of(big["top"], ask, "reader", f"task {number}", at_ms=100, duration_ms=40)
        for seq in (1, 2, 3):
            nested = step(member, seq, "tool_call", at_ms=seq, duration_ms=1, tool_name="ask_checker",
                          took_effect=False, result=answered("checker", "ok"))
        below = member_of(member, nested, "checker", "check", at_ms=5, duration_ms=5)
        step(below, 1, "model_call", at_ms=1, duration_ms=1, prompt_tokens=1)

    with CaptureQueriesContext(connection) as small_queries:
        assert staff.get(page_of(small)).status_code == 200
    with CaptureQueriesContext(connection) as big_queries:
        body = staff.get(page_of(big["top"])).content.decode()
    assert body.count('class="timeline-member ') == 3 + 10
    assert len(big_queries) == len(small_queries) <= 12, [query["sql"] for query in big_queries]
    # A member's page too: its tree is read at once, whatever its size.
    with CaptureQueriesContext(connection) as member_queries:
        assert staff.get(page_of(big["writer"])).status_code == 200
    assert len(member_queries) <= len(small_queries) + 1, [query["sql"] for query in member_queries]
    # And the run list, with its tree column: no query per row.
    with CaptureQueriesContext(connection) as list_queries:
        assert len(listed(staff, "")) == 4 + 4 + 10
    with CaptureQueriesContext(connection) as filtered_queries:
        assert len(listed(staff, "?tree=top")) == 2
    assert len(list_queries) <= len(filtered_queries) + 2, [query["sql"] for query in list_queries]
