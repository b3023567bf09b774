"""A run that plans, through the real socket, worker and database (the model is scripted): the plan is a row
before it is an event, each step's status follows the tool steps that carry it out, a failed step makes the
run plan again in the open (what was done stays done), and every step of the ended run has a final status."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from assistant.models import AgentChat, AgentPlan, AgentRun
from assistant.plans.record import plan_steps
from assistant.runs.lease import lease_claim
from assistant.testing.sockets import REPLY_ENDED, connect, receive_until
from assistant.turn.journal import StepJournal
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]



def statuses(plan: dict[str, Any]) -> list[str]:
    return [step["status"] for step in plan["steps"]]


def test_a_plan_of_three_steps_whose_second_fails_is_revised_in_the_open(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "assistant_plan", "arguments": {"steps": [
            {"do": "Add the task 'A' to Home", "tool": "tracker_task_create"},
            {"do": "Rename the project 999", "tool": "tracker_project_update"},
            {"do": "List your tasks", "tool": "tracker_task_list"},
        ]}}]},
        {"tool_calls": [{"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "A"}}]},
        {"tool_calls": [{"name": "tracker_project_update", "arguments": {"pk": 999_999, "name": "B"}}]},
        {"tool_calls": [{"name": "assistant_plan", "arguments": {
            "steps": [{"do": "List your tasks", "tool": "tracker_task_list"}],
            "reason": "That project does not exist; listing the tasks is still useful."}}]},
        {"tool_calls": [{"name": "tracker_task_list", "arguments": {}}]},
        {"text": "Added A; the project to rename was not found."},
    )
    tab = connect(alice)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "do three things", "new_chat": True})
        events = await receive_until(tab, lambda event: event["type"] in REPLY_ENDED, timeout=30)
        await tab.send_json_to({"type": "assistant.load", "steps": True})
        loaded = (await receive_until(tab, lambda event: event["type"] == "assistant.messages_loaded"))[-1]
        await tab.disconnect()
        return events, loaded

    with assistant_settings_with(MODEL=model):
        events, loaded = asyncio.run(scenario())

    assert events[-1]["type"] == "assistant.replied"
    run = AgentRun.objects.get(pk=events[-1]["run_id"])
    plans = [event["plan"] for event in events if event["type"] == "assistant.plan"]
    # Revision 1 as written, then its steps as they went: the first done, the second failed.
    assert (plans[0]["revision"], statuses(plans[0])) == (1, ["pending", "pending", "pending"])
    first = [plan for plan in plans if plan["revision"] == 1]
    assert statuses(first[-1]) == ["done", "failed", "pending"]
    # Revision 2: what was over stays as it ended, then what is still to do; then it is followed.
    second = [plan for plan in plans if plan["revision"] == 2]
    assert [step["do"] for step in second[0]["steps"]] == ["Add the task 'A' to Home", "Rename the project 999",
                                                          "List your tasks"]
    assert statuses(second[0]) == ["done", "failed", "pending"]
    assert second[0]["reason"] == "That project does not exist; listing the tasks is still useful."
    assert statuses(second[-1]) == ["done", "failed", "done"]

    # The rows say the same, each step linked to the tool steps that carried it out.
    rows = list(AgentPlan.objects.filter(run=run).order_by("revision"))
    assert [row.revision for row in rows] == [1, 2] and rows[1].steps == second[-1]["steps"]
    tools = {step.pk: step.tool_name for step in run.steps.filter(kind="tool_call")}
    assert [[tools[pk] for pk in step["step_ids"]] for step in rows[1].steps] == [
        ["tracker_task_create"], ["tracker_project_update"], ["tracker_task_list"]]
    # The model was told, with the failed call's outcome, to revise the plan: as data, in the tool result.
    failed = run.steps.get(tool_name="tracker_project_update")
    assert failed.result["status"] == "not_found" and first[-1]["steps"][1]["why"] == failed.result["reason"]
    assert failed.result["plan"] == {"step": 2, "status": "failed", "next": failed.result["plan"]["next"]}
    assert "Revise the plan" in failed.result["plan"]["next"]
    assert Task.objects.filter(project=home, title="A").count() == 1
    # A reload shows the same plan with the run.
    [shown] = [past for past in loaded["runs"] if past["id"] == run.pk]
    assert shown["plan"]["revision"] == 2 and statuses(shown["plan"]) == ["done", "failed", "done"]


def test_a_run_that_stops_leaves_every_step_of_its_plan_with_a_final_status(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "assistant_plan", "arguments": {"steps": [
            {"do": "List your tasks", "tool": "tracker_task_list"},
            {"do": "List them again", "tool": "tracker_task_list"},
            {"do": "And again", "tool": "tracker_task_list"},
        ]}}]},
        # The same call three times in a row: the run stops (repeated_tool_call) before the plan is through.
        *[{"tool_calls": [{"name": "tracker_task_list", "arguments": {}}]} for _ in range(3)],
    )
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "list thrice", "new_chat": True})
        events = await receive_until(tab, lambda event: event["type"] in REPLY_ENDED, timeout=30)
        await tab.disconnect()
        return events

    with assistant_settings_with(MODEL=model, MAX_IDENTICAL_TOOL_CALLS=3):
        events = asyncio.run(scenario())

    run = AgentRun.objects.get(pk=events[-1]["run_id"])
    assert (run.status, run.stop_reason) == ("failed", "repeated_tool_call")
    [plan] = AgentPlan.objects.filter(run=run)
    assert [step["status"] for step in plan.steps] == ["done", "done", "skipped"]
    assert "Not done" in plan.steps[2]["why"]
    # The last event about the plan is its final state, sent after the run's end was stored.
    last = [event for event in events if event["type"] == "assistant.plan"][-1]
    assert statuses(last["plan"]) == ["done", "done", "skipped"]


def _confirm(asked: dict[str, Any], **answer: Any) -> dict[str, Any]:
    return {"type": "assistant.confirm", "run_id": asked["run_id"], "step_id": asked["step"]["id"], **answer}


DELETE_THEN_LIST = {"tool_calls": [{"name": "assistant_plan", "arguments": {"steps": [
    {"do": "Delete the project Home", "tool": "tracker_project_delete"},
    {"do": "List your projects", "tool": "tracker_project_list"},
]}}]}


def test_a_plan_with_a_destructive_step_waits_and_a_comment_makes_a_revision_that_is_asked_again(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        DELETE_THEN_LIST,
        {"tool_calls": [{"name": "assistant_plan", "arguments": {
            "steps": [{"do": "Archive the project Home", "tool": "tracker_project_delete"}],
            "reason": "You asked to keep Home."}}]},
        {"text": "Understood; nothing was done."},
    )
    tab = connect(alice)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "clean up", "new_chat": True})
        first = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        await tab.send_json_to(_confirm(first, approve=False, comment="Keep Home, please."))
        second = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        # An approval of revision 1, sent after it was answered (another tab, a late click): refused.
        await tab.send_json_to(_confirm(first, approve=True))
        stale = (await receive_until(tab, lambda event: event["type"] == "assistant.error"))[-1]
        await tab.send_json_to(_confirm(second, approve=False))
        events = await receive_until(tab, lambda event: event["type"] in REPLY_ENDED, timeout=30)
        await tab.disconnect()
        return first, second, stale, events

    with assistant_settings_with(MODEL=model):
        first, second, stale, events = asyncio.run(scenario())

    # Nothing was done before (or after) the answers: the plan waited in the open.
    assert Project.objects.filter(pk=home.pk).exists()
    assert first["tool"]["name"] == "assistant_plan"
    assert first["step"]["summary"] == ("Plan:\n1. Delete the project Home — destructive: asks you again before it "
                                        "runs\n2. List your projects")
    assert stale["code"] == "stale_confirmation"
    run = AgentRun.objects.get(pk=events[-1]["run_id"])
    assert (run.status, run.reply) == ("succeeded", "Understood; nothing was done.")
    revisions = list(AgentPlan.objects.filter(run=run).order_by("revision"))
    assert [(plan.revision, plan.approval, plan.comment) for plan in revisions] == [
        (1, "commented", "Keep Home, please."), (2, "denied", "")]
    assert [plan.made_in_id for plan in revisions] == [first["step"]["id"], second["step"]["id"]]
    assert revisions[1].reason == "You asked to keep Home."
    assert [step["status"] for step in revisions[0].steps] == ["skipped", "skipped"]
    assert revisions[0].steps[0]["why"] == "You asked for changes to this plan."
    # The model heard the comment as the planning tool's result (data), and the decline of revision 2.
    asked = list(run.steps.filter(tool_name="assistant_plan").order_by("seq"))
    assert (asked[0].result["status"], asked[0].result["comment"]) == ("commented", "Keep Home, please.")
    assert asked[1].result["status"] == "declined"


def test_an_approved_plan_still_asks_before_its_destructive_step(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        DELETE_THEN_LIST,
        {"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
        {"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
        {"text": "Deleted Home."},
    )
    tab = connect(alice)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete Home", "new_chat": True})
        plan_card = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        await tab.send_json_to(_confirm(plan_card, approve=True))
        step_card = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        await tab.send_json_to(_confirm(step_card, approve=True))
        events = await receive_until(tab, lambda event: event["type"] in REPLY_ENDED, timeout=30)
        await tab.disconnect()
        return plan_card, step_card, events

    with assistant_settings_with(MODEL=model):
        plan_card, step_card, events = asyncio.run(scenario())

    # Approving the plan did not approve its destructive step: that asked on its own card, then ran once.
    assert (plan_card["step"]["tool_name"], step_card["step"]["tool_name"]) == (
        "assistant_plan", "tracker_project_delete")
    assert not Project.objects.filter(pk=home.pk).exists()
    run = AgentRun.objects.get(pk=events[-1]["run_id"])
    [plan] = AgentPlan.objects.filter(run=run)
    assert plan.approval == "approved" and [step["status"] for step in plan.steps] == ["done", "done"]


def test_a_declined_plan_does_nothing(alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(DELETE_THEN_LIST, {"text": "All right, I did nothing."})
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete Home", "new_chat": True})
        card = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        await tab.send_json_to(_confirm(card, approve=False))
        events = await receive_until(tab, lambda event: event["type"] in REPLY_ENDED, timeout=30)
        await tab.disconnect()
        return events

    with assistant_settings_with(MODEL=model):
        events = asyncio.run(scenario())

    assert Project.objects.filter(pk=home.pk).exists()
    run = AgentRun.objects.get(pk=events[-1]["run_id"])
    assert run.reply == "All right, I did nothing."
    [plan] = AgentPlan.objects.filter(run=run)
    assert plan.approval == "denied"
    assert [(step["status"], step["why"]) for step in plan.steps] == [("skipped", "You declined this plan.")] * 2
    assert not run.steps.filter(tool_name__startswith="tracker_").exists()


@pytest.mark.django_db
def test_another_persons_plan_answers_like_a_missing_one(alice: Any, bob: Any) -> None:
    from assistant.conversation.services import chat_send, run_confirm
    from assistant.live.selectors import NotFound

    run = chat_send(user=alice, content="clean up").run
    AgentRun.objects.filter(pk=run.pk).update(status="awaiting_confirmation")
    step = run.steps.create(seq=1, kind="tool_call", tool_name="assistant_plan", call_id="p1",
                            state="awaiting_confirmation", arguments={"steps": []})
    plan = AgentPlan.objects.create(run=run, revision=1, made_in=step, approval="waiting",
                                    steps=[{"n": 1, "do": "Delete Home", "tool": "tracker_project_delete",
                                            "member": "", "member_note": "", "status": "pending",
                                            "step_ids": [], "why": ""}])
    for answer in ({"approve": True}, {"approve": False, "comment": "Keep it."}):
        with pytest.raises(NotFound) as missing:
            run_confirm(user=bob, run_id=run.pk, step_id=step.pk, **answer)
        assert str(missing.value) == f"No run {run.pk!r}."
    plan.refresh_from_db()
    step.refresh_from_db()
    assert (plan.approval, plan.comment, step.confirmation) == ("waiting", "", "")
    # Nor does a comment answer anything but a plan, or come with an approval.
    from assistant.conversation.services import Refused

    with pytest.raises(Refused):
        run_confirm(user=alice, run_id=run.pk, step_id=step.pk, approve=True, comment="Keep it.")


def test_a_revision_numbers_new_steps_after_every_step_it_keeps() -> None:
    from assistant.plans.record import plan_steps

    kept = [{"n": 1, "do": "a", "status": "done"}, {"n": 3, "do": "c", "status": "failed"}]
    steps = plan_steps([{"do": "d"}, {"do": "e", "tool": "ask_clerk"}], kept=kept, members={"ask_clerk": "clerk"},
                       notes={"clerk": "no record yet"})
    assert [(step["n"], step["do"]) for step in steps] == [(1, "a"), (3, "c"), (4, "d"), (5, "e")]
    assert (steps[3]["member"], steps[3]["member_note"], steps[3]["status"]) == ("clerk", "no record yet", "pending")


@pytest.mark.django_db(transaction=True)
def test_a_step_the_plan_never_heard_start_still_ends_its_plan_step_as_it_ended(alice: Any) -> None:
    """A worker that dies between writing a tool step and the plan's note of it leaves the step started and its plan
    step pending. The worker that takes the run up finds the step's outcome unknown: the plan step it carried out
    fails, saying so, rather than ending as "skipped" (never started) when the run answers."""
    chat = AgentChat.objects.create(owner=alice)
    run = lease_claim(AgentRun.objects.create(owner=alice, chat=chat, model="offline").pk, "first-worker")
    assert run is not None
    plan = AgentPlan.objects.create(run=run, revision=1, steps=plan_steps([
        {"do": "Record one", "tool": "test_record_effect"}, {"do": "Record two, slowly", "tool": "test_slow_effect"}]))
    # The step as the dead worker left it: on the record, the plan not told.
    started = StepJournal(run, "first-worker", []).add(kind="tool_call", state="started",
                                                        tool_name="test_slow_effect", call_id="c2")
    assert statuses({"steps": AgentPlan.objects.get(pk=plan.pk).steps}) == ["pending", "pending"]

    StepJournal(run, "first-worker", [started], plan=plan).finish_step(
        started, {"status": "unknown", "took_effect": None, "reason": "The worker stopped before it finished."})

    plan.refresh_from_db()
    assert statuses({"steps": plan.steps}) == ["pending", "failed"]
    assert plan.steps[1]["step_ids"] == [started.pk] and "stopped before it finished" in plan.steps[1]["why"]
