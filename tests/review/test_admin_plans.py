"""Staff reviewing a run's plan (assistant/plans/) through the real admin: every revision on the run's page with
its reason, its steps' statuses in words, the member each was for, why one failed or was skipped, links to the
steps that carried it out and what changed against the revision before; a member's plan in its block and on its
own page; the run list filtered by plans; plans read-only, whatever the setting; a prune taking them with their
runs; and a page whose queries do not grow with the plans. The plans are rows made here."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assistant.models import AgentPlan, AgentRun, AgentStep
from tests.conftest import assistant_settings_with
from tests.review.test_admin_run_trees import answered, ended_tree, member_of, page_of
from tests.review.test_admin_runs import RUNS, a_run, listed, step, timeline_rows

pytestmark = pytest.mark.django_db

PLANS = "/admin/assistant/agentplan/"


@pytest.fixture
def staff(user_factory: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    return client


def plan_step(n: int, do: str, tool: str = "", status: str = "pending", *, member: str = "", note: str = "",
              steps: tuple[AgentStep, ...] = (), why: str = "") -> dict[str, Any]:
    return {"n": n, "do": do, "tool": tool, "member": member, "member_note": note, "status": status,
            "step_ids": [made.pk for made in steps], "why": why}


def a_plan(run: AgentRun, revision: int, steps: list[dict[str, Any]], *, made_in: AgentStep | None = None,
           reason: str = "", **fields: Any) -> AgentPlan:
    return AgentPlan.objects.create(run=run, revision=revision, steps=steps, made_in=made_in, reason=reason,
                                    **fields)


NOT_FOUND = "There is no project 999."
REASON = "That project does not exist; the reader checks the list instead."


def revised_run(owner: Any) -> dict[str, Any]:
    """A run that planned four steps, saw its second fail, and revised: steps 1 and 2 kept as they ended, the
    reader asked (a member's run with a plan of its own), the list kept under another number, the summary
    dropped; then it answered, so its last step was skipped."""
    started = timezone.now() - timedelta(seconds=20)
    run = a_run(owner, "Do three things", reply="Added A; the project was not found.", started_at=started,
                finished_at=started + timedelta(seconds=8), duration_ms=8000, model_calls=3, tool_calls=5,
                tool_errors=1)
    step(run, 1, "model_call", at_ms=300, duration_ms=300, result={"text": "", "tool_calls": [
        {"name": "assistant_plan"}]})
    first_call = step(run, 2, "tool_call", at_ms=350, duration_ms=5, tool_name="assistant_plan", took_effect=False,
                      arguments={"steps": [{"do": "Add the task A"}]},
                      result={"status": "planned", "took_effect": False, "revision": 1, "steps": []})
    create = step(run, 3, "tool_call", at_ms=400, duration_ms=50, tool_name="tracker_task_create",
                  took_effect=True, result={"status": "done", "took_effect": True})
    rename = step(run, 4, "tool_call", at_ms=500, duration_ms=50, tool_name="tracker_project_update",
                  took_effect=False, reason=NOT_FOUND,
                  result={"status": "not_found", "took_effect": False, "reason": NOT_FOUND})
    second_call = step(run, 5, "tool_call", at_ms=600, duration_ms=5, tool_name="assistant_plan", took_effect=False,
                       arguments={"steps": [], "reason": REASON},
                       result={"status": "planned", "took_effect": False, "revision": 2, "steps": []})
    ask = step(run, 6, "tool_call", at_ms=700, duration_ms=3000, tool_name="ask_reader", took_effect=False,
               arguments={"task": "Check my list."}, result=answered("reader", "The list is fine."))
    listing = step(run, 7, "tool_call", at_ms=3800, duration_ms=40, tool_name="tracker_task_list",
                   took_effect=False, result={"status": "data", "took_effect": False, "data": {}})
    step(run, 8, "model_call", at_ms=7900, duration_ms=100, result={"text": "Added A.", "tool_calls": []})

    first = a_plan(run, 1, [
        plan_step(1, "Add the task A", "tracker_task_create", "done", steps=(create,)),
        plan_step(2, "Rename the project 999", "tracker_project_update", "failed", steps=(rename,), why=NOT_FOUND),
        plan_step(3, "List the tasks", "tracker_task_list"),
        plan_step(4, "Email the summary"),
    ], made_in=first_call)
    second = a_plan(run, 2, [
        plan_step(1, "Add the task A", "tracker_task_create", "done", steps=(create,)),
        plan_step(2, "Rename the project 999", "tracker_project_update", "failed", steps=(rename,), why=NOT_FOUND),
        plan_step(3, "Have the reader check the list", "ask_reader", "done", member="reader",
                  note="answered 9 of its last 10 tasks", steps=(ask,)),
        plan_step(4, "List  the tasks", "tracker_task_list", "done", steps=(listing,)),
        plan_step(5, "Say what was done", "", "skipped", why="The assistant answered without doing this."),
    ], made_in=second_call, reason=REASON)

    reader = member_of(run, ask, "reader", "Check my list.", at_ms=750, duration_ms=2900, reply="The list is fine.",
                       model_calls=2, tool_calls=2)
    step(reader, 1, "tool_call", at_ms=100, duration_ms=5, tool_name="assistant_plan", took_effect=False,
         result={"status": "planned", "took_effect": False, "revision": 1, "steps": []})
    read = step(reader, 2, "tool_call", at_ms=200, duration_ms=50, tool_name="tracker_task_list", took_effect=False,
                result={"status": "data", "took_effect": False, "data": {}})
    reader_plan = a_plan(reader, 1, [
        plan_step(1, "Read the list", "tracker_task_list", "done", steps=(read,)),
        plan_step(2, "Count the overdue tasks", "", "skipped", why="The assistant answered without doing this."),
    ], made_in=reader.steps.get(seq=1))
    return {"run": run, "first": first, "second": second, "reader": reader, "reader_plan": reader_plan,
            "steps": {"create": create, "rename": rename, "ask": ask, "listing": listing, "read": read}}


def block(body: str, anchor: str) -> str:
    """A plan revision's block on the page, by its id."""
    return body.split(f'id="{anchor}"')[1].split("</details>")[0]


def plan_rows(html: str) -> list[dict[str, str]]:
    """A revision's steps as staff read them: each cell's text (tags dropped), and its status and links."""
    rows = []
    for status, cells in re.findall(r'<tr class="plan-step" data-status="([^"]+)">(.*?)</tr>', html, flags=re.S):
        found = dict(re.findall(r'<td class="plan-(\w+)[^"]*">(.*?)</td>', cells, flags=re.S))
        row = {name: " ".join(re.sub(r"<[^>]+>", " ", value).split()) for name, value in found.items()}
        row["data-status"] = status
        row["hrefs"] = " ".join(re.findall(r'href="([^"]+)"', found.get("links", "")))
        rows.append(row)
    return rows


def test_a_runs_page_shows_every_revision_of_its_plan_with_what_changed(staff: Client, alice: Any) -> None:
    made = revised_run(alice)
    run, reader = made["run"], made["reader"]
    body = staff.get(page_of(run)).content.decode()

    # The plan between the run's summary and its steps: revision 1, then 2 (open, the plan it followed).
    assert body.index('id="run-plan"') < body.index('id="run-timeline"')
    first_id, second_id = f"plan-{run.pk}-rev-1", f"plan-{run.pk}-rev-2"
    assert body.index(f'id="{first_id}"') < body.index(f'id="{second_id}"')
    assert re.search(rf'<details class="plan-revision" id="{first_id}">', body)
    assert re.search(rf'<details class="plan-revision plan-revision-current" id="{second_id}" open>', body)
    summary = body.split('class="run-plan-fact"')[1].split("</dd>")[0]
    assert f'<a href="#{second_id}">revision 2</a> (revised 1 time)' in summary
    assert "5 steps: 3 done, 1 failed, 1 skipped" in summary

    # Revision 1: when and by which step, the statuses it had when revision 2 replaced it.
    first = block(body, first_id)
    assert "Revision 1</span> · 4 steps: 1 done, 1 failed, 2 pending · replaced by revision 2" in first
    assert 'by step <a href="#step-2">#2</a>' in first
    assert "Why this revision" not in first
    assert "as they were when revision 2 replaced it" in first
    assert [(row["n"], row["status"], row["hrefs"]) for row in plan_rows(first)] == [
        ("1", "✓ done", "#step-3"),
        ("2", f"✗ failed {NOT_FOUND}", "#step-4"),
        ("3", "○ pending", ""),
        ("4", "○ pending", ""),
    ]

    # Revision 2: its reason, what changed (by number), each step with its member, why, and its steps' links.
    second = block(body, second_id)
    assert "the plan it followed" in second and 'by step <a href="#step-5">#5</a>' in second
    assert f'<dd class="plan-reason">{REASON}</dd>' in second
    diff = second.split('<dd class="plan-diff">')[1].split("</dd>")[0]
    assert diff == "3 kept (steps 1, 2, 4 (was 3)), 2 added (steps 3, 5), 1 dropped (revision 1’s step 4)"
    rows = plan_rows(second)
    assert [row["data-status"] for row in rows] == ["done", "failed", "done", "done", "skipped"]
    assert [row["status"] for row in rows] == [
        "✓ done", f"✗ failed {NOT_FOUND}", "✓ done", "✓ done", "⤼ skipped The assistant answered without doing this."]
    assert [row["change"] for row in rows] == ["kept", "kept", "added", "kept (was 3)", "added"]
    assert rows[2]["do"] == "Have the reader check the list ask_reader"
    assert rows[2]["member"] == "reader answered 9 of its last 10 tasks"
    assert [row["member"] for row in rows[:2]] == ["—", "—"]
    assert [row["hrefs"] for row in rows] == ["#step-3", "#step-4", "#step-6", "#step-7", ""]
    assert [row["links"] for row in rows] == ["#3", "#4", "#6", "#7", "—"]
    dropped = second.split('class="plan-dropped"')[1]
    assert "Dropped from revision 1:" in dropped and "4. Email the summary — pending there" in dropped

    # Every link leads to a row of this page, and each planning step leads back to the revision it wrote.
    for anchor in ("step-3", "step-4", "step-6", "step-7", "step-2", "step-5"):
        assert f'id="{anchor}"' in body, anchor
    steps = timeline_rows(body)
    assert 'data-effect="planned"' in steps["2"] and f'<a href="#{first_id}">revision 1 of the plan</a>' in steps["2"]
    assert 'data-effect="planned"' in steps["5"] and f'<a href="#{second_id}">revision 2 of the plan</a>' in steps["5"]
    assert "☰ plan written" in body.split('id="run-timeline"')[1].split("</h2>")[0]
    legend = body.split('id="run-plan"')[1].split("</h2>")[0]
    assert "✓ done · ✗ failed · ⤼ skipped · … in progress · ○ pending" in legend

    # The member's plan is in its block, its steps linked to the member's own rows.
    member = body.split(f'id="member-{reader.pk}"')[1]
    assert member.index('class="member-plan" open') < member.index('class="member-steps"')
    own = block(member, f"plan-{reader.pk}-rev-1")
    assert [(row["status"], row["hrefs"]) for row in plan_rows(own)] == [
        ("✓ done", f"#run-{reader.pk}-step-2"),
        ("⤼ skipped The assistant answered without doing this.", ""),
    ]
    assert f'by step <a href="#run-{reader.pk}-step-1">#1</a>' in own
    assert f'id="run-{reader.pk}-step-2"' in body
    assert "Its plan: revision 1 · 2 steps: 1 done, 1 skipped" in member


def test_a_members_own_page_shows_its_plan_linked_to_its_own_steps(staff: Client, alice: Any) -> None:
    made = revised_run(alice)
    reader = made["reader"]
    body = staff.get(page_of(reader)).content.decode()
    own = block(body, f"plan-{reader.pk}-rev-1")
    assert [row["hrefs"] for row in plan_rows(own)] == ["#step-2", ""]
    assert 'by step <a href="#step-1">#1</a>' in own and "the plan it followed" in own
    # Only its own plan: the plan of the run that asked it is on that run's page.
    assert f"plan-{made['run'].pk}-rev-" not in body


def test_an_active_runs_plan_says_it_is_followed_and_a_plan_waiting_for_approval_says_so(
    staff: Client, alice: Any
) -> None:
    started = timezone.now() - timedelta(seconds=3)
    run = a_run(alice, "Tidy up", status=AgentRun.Status.AWAITING_CONFIRMATION, started_at=started)
    call = step(run, 1, "tool_call", at_ms=100, tool_name="assistant_plan", state="awaiting_confirmation",
                summary="Plan:\n1. Delete Home")
    a_plan(run, 1, [plan_step(1, "Delete the project Home", "tracker_project_delete")], made_in=call,
           approval=AgentPlan.Approval.WAITING)
    body = staff.get(page_of(run)).content.decode()
    current = block(body, f"plan-{run.pk}-rev-1")
    assert "the plan it follows" in current
    assert '<dd class="plan-approval">waiting for the person’s approval</dd>' in current
    assert [row["status"] for row in plan_rows(current)] == ["○ pending"]
    assert f'<a href="#plan-{run.pk}-rev-1">revision 1 of the plan</a>' in timeline_rows(body)["1"]

    answered_at = timezone.now()
    AgentPlan.objects.filter(run=run).update(approval=AgentPlan.Approval.COMMENTED, comment="Keep Home, delete Old.",
                                             answered_at=answered_at)
    current = block(staff.get(page_of(run)).content.decode(), f"plan-{run.pk}-rev-1")
    assert "not approved: the person asked for changes: “Keep Home, delete Old.”" in current


def test_a_run_without_a_plan_shows_none(staff: Client, alice: Any) -> None:
    run = a_run(alice, "hello", reply="Hi.")
    body = staff.get(page_of(run)).content.decode()
    assert 'id="run-plan"' not in body and "run-plan-fact" not in body and "plan written" not in body


def plan_queries(queries: CaptureQueriesContext) -> list[str]:
    return [query["sql"] for query in queries if "assistant_agentplan" in query["sql"]]


def test_a_trees_page_reads_all_its_plans_in_one_query(staff: Client, alice: Any) -> None:
    """The page of a tree whose four runs each planned (one of them three revisions) costs what the same tree
    without plans does, the plans all read in one query, and a tree of thirteen planning members the same."""
    bare = ended_tree(alice)["top"]
    with CaptureQueriesContext(connection) as bare_queries:
        assert staff.get(page_of(bare)).status_code == 200

    small = ended_tree(alice)
    for run in small.values():
        a_plan(run, 1, [plan_step(1, "Do it", status="done")])
    for revision in (2, 3):
        a_plan(small["top"], revision, [plan_step(1, "Do it", status="done")], reason=f"again {revision}")
    with CaptureQueriesContext(connection) as small_queries:
        body = staff.get(page_of(small["top"])).content.decode()
    assert body.count('<details class="plan-revision') == 3 + 3
    assert len(small_queries) == len(bare_queries), [query["sql"] for query in small_queries]
    assert len(plan_queries(small_queries)) == 1, plan_queries(small_queries)

    big = ended_tree(alice)
    for run in big.values():
        a_plan(run, 1, [plan_step(1, "Do it", status="done")])
    for number in range(9):
        ask = step(big["top"], 10 + number, "tool_call", at_ms=100, duration_ms=50, tool_name="ask_reader",
                   took_effect=False, result=answered("reader", f"answer {number}"))
        member = member_of(big["top"], ask, "reader", f"task {number}", at_ms=100, duration_ms=40)
        done = step(member, 1, "tool_call", at_ms=1, duration_ms=1, tool_name="tracker_task_list", took_effect=False,
                    result={"status": "data", "took_effect": False})
        a_plan(member, 1, [plan_step(1, "List", "tracker_task_list", "done", steps=(done,))])
        a_plan(member, 2, [plan_step(1, "List", "tracker_task_list", "done", steps=(done,))], reason="again")
    with CaptureQueriesContext(connection) as big_queries:
        body = staff.get(page_of(big["top"])).content.decode()
    assert body.count('<details class="plan-revision') == 4 + 9 * 2
    assert len(big_queries) == len(small_queries), [query["sql"] for query in big_queries]
    assert len(plan_queries(big_queries)) == 1, plan_queries(big_queries)


# --- read-only --------------------------------------------------------------------------------------


@pytest.fixture
def all_perms(user_factory: Callable[..., Any]) -> Client:
    staffer = user_factory("editor", is_staff=True)
    staffer.user_permissions.set(Permission.objects.filter(content_type__app_label="assistant"))
    client = Client()
    client.force_login(staffer)
    return client


def test_plans_are_read_only_for_everyone_whatever_the_setting(staff: Client, all_perms: Client,
                                                               alice: Any) -> None:
    made = revised_run(alice)
    plan = made["second"]
    for editable in (False, True):
        with assistant_settings_with(ADMIN_EVIDENCE_EDITABLE=editable):
            for client in (staff, all_perms):
                listing = client.get(PLANS)
                assert listing.status_code == 200
                page = client.get(f"{PLANS}{plan.pk}/change/")
                assert page.status_code == 200
                text = listing.content.decode() + page.content.decode()
                assert f"{PLANS}add/" not in text and f"{PLANS}{plan.pk}/delete/" not in text
                assert 'value="delete_selected"' not in text and 'name="_save"' not in text
                assert client.get(f"{PLANS}add/").status_code == 403
                assert client.post(f"{PLANS}add/", {"run": made["run"].pk, "revision": 9}).status_code == 403
                assert client.post(f"{PLANS}{plan.pk}/change/", {"reason": "edited"}).status_code == 403
                assert client.get(f"{PLANS}{plan.pk}/delete/").status_code == 403
                assert client.post(f"{PLANS}{plan.pk}/delete/", {"post": "yes"}).status_code == 403
                client.post(PLANS, {"action": "delete_selected", "_selected_action": [plan.pk], "index": 0,
                                    "post": "yes"})
    plan.refresh_from_db()
    assert plan.reason == REASON and AgentPlan.objects.count() == 3

    # Its record reads as the run's page does, and leads there, to this revision.
    page = staff.get(f"{PLANS}{plan.pk}/change/").content.decode()
    assert f'href="{page_of(made["run"])}#plan-{made["run"].pk}-rev-2"' in page
    assert "Rename the project 999 — failed: There is no project 999." in page
    assert "Have the reader check the list — done (member reader)" in page


def test_a_run_staff_may_delete_goes_with_its_plans(staff: Client, alice: Any) -> None:
    """Where the setting lets staff delete runs, a run's plans do not hold it back: they go with it."""
    made = revised_run(alice)
    run = made["run"]
    with assistant_settings_with(ADMIN_EVIDENCE_EDITABLE=True):
        confirm = staff.get(f"{RUNS}{run.pk}/delete/")
        assert confirm.status_code == 200 and "permission to delete" not in confirm.content.decode()
        assert staff.post(f"{RUNS}{run.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not AgentRun.objects.filter(pk=run.pk).exists()
    assert not AgentPlan.objects.filter(run_id=run.pk).exists()


def test_only_staff_who_may_view_plans_see_them(user_factory: Callable[..., Any], alice: Any) -> None:
    revised_run(alice)
    staff_without = Client()
    staff_without.force_login(user_factory(is_staff=True))
    assert staff_without.get(PLANS).status_code == 403
    viewer = user_factory(is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agentplan"))
    client = Client()
    client.force_login(viewer)
    assert client.get(PLANS).status_code == 200


def plans_listed(client: Client, query: str = "") -> list[int]:
    response = client.get(PLANS + query)
    assert response.status_code == 200, (query, response.status_code)
    return [plan.pk for plan in response.context["cl"].result_list]


def test_the_plan_list_filters_by_what_it_names_and_refuses_any_other_lookup(staff: Client, alice: Any) -> None:
    made = revised_run(alice)
    first, second, reader_plan = made["first"], made["second"], made["reader_plan"]
    assert set(plans_listed(staff)) == {first.pk, second.pk, reader_plan.pk}
    assert set(plans_listed(staff, "?revision=first")) == {first.pk, reader_plan.pk}
    assert plans_listed(staff, "?revision=later") == [second.pk]
    assert set(plans_listed(staff, "?step_status=failed")) == {first.pk, second.pk}
    assert set(plans_listed(staff, "?step_status=pending")) == {first.pk}
    assert set(plans_listed(staff, "?step_status=skipped")) == {second.pk, reader_plan.pk}
    assert plans_listed(staff, "?q=reader+checks") == [second.pk]
    assert set(plans_listed(staff, "?q=Email")) == {first.pk}
    listing = staff.get(PLANS).content.decode()
    assert "by a step that is" in listing.lower() and "?step_status=in_progress" in listing
    # A value a filter cannot read is said; any other lookup, on any column, is a 400.
    assert staff.get(PLANS + "?step_status=lost")["Location"].endswith("?e=1")
    assert staff.get(PLANS + "?revision=2")["Location"].endswith("?e=1")
    for refused in ("?reason__startswith=T", "?steps__contains=x", "?run__owner__password__startswith=p",
                    "?made_in__isnull=True", "?revision__gte=2"):
        assert staff.get(PLANS + refused).status_code == 400, refused


def test_the_run_list_filters_runs_by_their_plans(staff: Client, alice: Any, bob: Any) -> None:
    made = revised_run(alice)
    run, reader = made["run"], made["reader"]
    lone = a_run(bob, "hello", reply="Hi.")
    # A plan never revised, whose reader step failed: its newest revision says so.
    other = a_run(bob, "check twice", reply="Could not.")
    a_plan(other, 1, [plan_step(1, "Ask the reader", "ask_reader", "failed", member="reader", why="escalated"),
                      plan_step(2, "Ask the writer", "ask_writer", "done", member="writer")])

    assert set(listed(staff, "?plan=yes")) == {run.pk, reader.pk, other.pk}
    assert set(listed(staff, "?plan=no")) == {lone.pk}
    assert listed(staff, "?plan=revised") == [run.pk]
    assert set(listed(staff, "?plan=step_failed")) == {run.pk, other.pk}
    assert set(listed(staff, "?plan_member=reader")) == {run.pk, other.pk}
    assert listed(staff, "?plan_member=writer") == [other.pk]
    # One and the same step: the reader's failed in `other`, not in `run` (where another step failed).
    assert listed(staff, "?plan_member=reader&plan=step_failed") == [other.pk]
    assert listed(staff, "?plan_member=writer&plan=step_failed") == []
    assert listed(staff, "?plan_member=reader&plan=revised") == [run.pk]
    assert listed(staff, "?plan=yes&tree=member") == [reader.pk]
    page = staff.get(RUNS + "?plan_member=reader").content.decode()
    assert "A step for reader failed" in page and "by plan" in page.lower()
    assert staff.get(RUNS + "?plan=sideways")["Location"].endswith("?e=1")
    assert staff.get(RUNS + "?plan=no&plan_member=reader")["Location"].endswith("?e=1")
    assert staff.get(RUNS + "?plans__revision__gte=2").status_code == 400


def test_a_prune_deletes_old_runs_plans_with_them(alice: Any) -> None:
    old = revised_run(alice)
    kept = revised_run(alice)
    for run in (old["run"], old["reader"]):
        AgentRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=100))
    out = StringIO()
    call_command("assistant_prune", "--older-than", "90d", stdout=out)
    assert not AgentRun.objects.filter(pk__in=[old["run"].pk, old["reader"].pk]).exists()
    assert not AgentPlan.objects.filter(run_id__in=[old["run"].pk, old["reader"].pk]).exists()
    assert set(AgentPlan.objects.values_list("pk", flat=True)) == {
        kept["first"].pk, kept["second"].pk, kept["reader_plan"].pk}
    # The plans that stay still name the steps that wrote them.
    assert AgentPlan.objects.get(pk=kept["second"].pk).made_in_id is not None
