"""The site's demo society with the offline demo model, on a fresh machine with no key: the orchestrator
splits a request of several parts into tasks, hands each to the member whose role fits it, and tells the
person what each did — through the real worker and database, every member under its own spec."""

from __future__ import annotations

import re
from typing import Any

import pytest

from assistant.conversation.services import chat_send, run_confirm
from assistant.models import AgentChat, AgentPlan, AgentRun
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, wait_for_run
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

GARDEN = "create a project Garden with the tasks 'water the plants' and 'buy seeds', then tell me my open tasks"


def ask_orchestrator(user: Any, text: str) -> AgentRun:
    chat = AgentChat.objects.create(owner=user, spec="orchestrator")
    return wait_for_run(chat_send(user=user, content=text, chat_id=chat.pk).run.pk, *AgentRun.ENDED_STATUSES,
                        timeout=60)


def worked_by(top: AgentRun) -> list[AgentRun]:
    """The runs that did a request's work: the run itself when the request was routed to a member (it became that
    member's run), else the members it asked, first asked first."""
    return [top] if top.routed_from else list(AgentRun.objects.filter(root=top).order_by("pk"))


def test_the_demo_model_hands_each_part_of_a_request_to_its_member(alice: Any, celery_worker: WorkerProcess) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")

    top = ask_orchestrator(alice, GARDEN)

    assert top.status == "succeeded", top.error
    members = list(AgentRun.objects.filter(root=top).order_by("pk"))
    assert [(run.spec, run.task, run.status) for run in members] == [
        ("keeper", "Create the project 'Garden'.", "succeeded"),
        ("clerk", "Add the task 'water the plants' to the project 'Garden'.", "succeeded"),
        ("clerk", "Add the task 'buy seeds' to the project 'Garden'.", "succeeded"),
        ("reader", "List my open tasks.", "succeeded"),
    ]
    garden = Project.objects.get(owner=alice, name="Garden")
    assert sorted(garden.tasks.values_list("title", flat=True)) == ["buy seeds", "water the plants"]
    # The orchestrator changed nothing itself: every effect is a member's, each under its own tools.
    assert set(top.steps.filter(kind="tool_call").exclude(tool_name__startswith="ask_")
               .values_list("tool_name", flat=True)) == {"assistant_plan"}
    # It said its plan first, then followed it: each step done, carried out by the step that asked its member.
    [plan] = AgentPlan.objects.filter(run=top)
    assert [(step["do"], step["member"], step["status"]) for step in plan.steps] == [
        ("Create the project 'Garden'.", "keeper", "done"),
        ("Add the task 'water the plants' to the project 'Garden'.", "clerk", "done"),
        ("Add the task 'buy seeds' to the project 'Garden'.", "clerk", "done"),
        ("List my open tasks.", "reader", "done"),
    ]
    asking = {step.pk: step.tool_name for step in top.steps.filter(tool_name__startswith="ask_")}
    assert [[asking[pk] for pk in step["step_ids"]] for step in plan.steps] == [
        ["ask_keeper"], ["ask_clerk"], ["ask_clerk"], ["ask_reader"]]
    assert plan.made_in.tool_name == "assistant_plan" and plan.made_in.seq < min(
        top.steps.filter(tool_name__startswith="ask_").values_list("seq", flat=True))
    # The two tasks for the clerk were asked in one answer.
    asked = list(top.steps.filter(kind="tool_call").order_by("seq"))
    clerk_steps = [step for step in asked if step.tool_name == "ask_clerk"]
    assert len({step.call_id for step in clerk_steps}) == 2
    assert len({step.result["child_run_id"] for step in clerk_steps}) == 2
    # The reply tells the person what each member did, the open tasks last.
    assert "Garden" in top.reply and "water the plants" in top.reply and "Fix the tap" in top.reply
    assert top.reply.index("keeper") < top.reply.index("reader")
    # Every run filed once in its own spec's profile (the clerk's two, asked at once, in the order they ended).
    window = {profile.spec_name: sorted(entry["run_id"] for entry in profile.window)
              for profile in AgentProfile.objects.filter(owner=alice)}
    assert window == {"orchestrator": [top.pk], "keeper": [members[0].pk],
                      "clerk": sorted([members[1].pk, members[2].pk]), "reader": [members[3].pk]}


def test_a_single_request_goes_to_the_one_member_for_it(alice: Any, celery_worker: WorkerProcess) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")

    run = ask_orchestrator(alice, "list my open tasks")

    # Plainly the reader's: the run became the reader's, with no model call of the orchestrator's and no member run.
    assert run.status == "succeeded", run.error
    assert (run.spec, run.routed_from, worked_by(run)) == ("reader", "orchestrator", [run])
    assert "Fix the tap" in run.reply


def test_a_members_failure_stops_the_plan_and_says_what_was_not_done(alice: Any, celery_worker: WorkerProcess) -> None:
    # No project "Attic": the clerk cannot add a task to it, so listing afterwards is not tried.
    top = ask_orchestrator(alice, "add the task 'sweep' to the project 'Attic', then tell me my open tasks")

    assert top.status == "succeeded", top.error
    [clerk] = AgentRun.objects.filter(root=top)
    assert clerk.spec == "clerk"
    assert "I stopped there" in top.reply and "Attic" in top.reply
    assert not Task.objects.filter(title="sweep").exists()
    # Re-planned in the open: the failed step stays failed with why, and the list is not tried.
    first, revised = AgentPlan.objects.filter(run=top).order_by("revision")
    assert [step["status"] for step in first.steps] == ["failed", "pending"]
    assert [(step["status"], step["member"]) for step in revised.steps] == [("failed", "clerk")]
    assert "tracker_task_create" in revised.steps[0]["why"] and "clerk could not do" in revised.reason


@pytest.mark.parametrize(("request_text", "member", "effect"), [
    ("what are my open tasks?", "reader", None),
    ("create a task 'Buy milk' in Home", "clerk", "Buy milk"),
    ("add the task 'milk' to the project 'Home', then show me my tasks", "clerk", "milk"),
])
def test_the_readmes_requests_go_through_the_members(
    alice: Any, celery_worker: WorkerProcess, request_text: str, member: str, effect: str | None
) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")

    top = ask_orchestrator(alice, request_text)

    assert top.status == "succeeded", top.error
    members = worked_by(top)
    assert members[0].spec == member and all(run.status == "succeeded" for run in members)
    if effect is not None:
        assert Task.objects.filter(project__owner=alice, title=effect).count() == 1
    assert "Fix the tap" in top.reply or effect in top.reply


def test_a_delete_is_routed_to_the_keeper_whose_run_waits_for_the_persons_approval(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    chat = AgentChat.objects.create(owner=alice, spec="orchestrator")
    # Plainly the keeper's (only it deletes projects): the run becomes the keeper's, and waits for the person.
    keeper = wait_for_run(chat_send(user=alice, content="delete the project Home", chat_id=chat.pk).run.pk,
                          "awaiting_confirmation", *AgentRun.ENDED_STATUSES, timeout=60)
    assert (keeper.status, keeper.spec, keeper.routed_from) == ("awaiting_confirmation", "keeper", "orchestrator")
    waiting = keeper.steps.get(state="awaiting_confirmation")
    assert waiting.tool_name == "tracker_project_delete" and "Home" in waiting.summary
    assert Project.objects.filter(owner=alice, name="Home").exists()


def test_declining_a_members_action_is_said_to_the_person_in_their_words(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    chat = AgentChat.objects.create(owner=alice, spec="orchestrator")
    top = wait_for_run(chat_send(user=alice, content="delete the project Home, then tell me my open tasks",
                                 chat_id=chat.pk).run.pk, "awaiting_members", *AgentRun.ENDED_STATUSES, timeout=60)
    keeper = wait_for_run(AgentRun.objects.get(root=top).pk, "awaiting_confirmation", *AgentRun.ENDED_STATUSES,
                          timeout=30)
    asked = keeper.steps.get(state="awaiting_confirmation")
    run_confirm(user=alice, run_id=keeper.pk, step_id=asked.pk, approve=False)

    top = wait_for_run(top.pk, *AgentRun.ENDED_STATUSES, timeout=60)
    assert Project.objects.filter(owner=alice, name="Home").exists()
    assert "You declined it, so nothing was changed." in top.reply
    # What the model was told about the refusal is for the model, never the person's reply.
    assert "Do not try it again" not in top.reply


# One line per member of the orchestrator's "what can you do?": its name, its role, and an example request.
MEMBER_LINE = re.compile(r"^- \*\*(?P<member>[\w-]+)\*\* — (?P<role>.+?)(?: — e\.g\. “(?P<example>[^”]+)”)?$",
                         re.MULTILINE)


def filled(example: str) -> str:
    """An example as a person sends it: each placeholder replaced by a value."""
    return re.sub(r"<[^<>]*\bid>", "41", re.sub(r"'<[^<>]+>'", "'Home'", example))


def test_what_can_you_do_is_answered_by_the_orchestrator_from_its_members_roles(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    top = ask_orchestrator(alice, "what can you do?")

    assert top.status == "succeeded", top.error
    # A question about the assistant itself costs what it costs one assistant: no member asked, one model call.
    assert not AgentRun.objects.filter(parent=top).exists()
    assert [step.kind for step in top.steps.order_by("seq")] == ["model_call"]
    # Each member it may ask, by name, with its role in the words the site gave it.
    lines = {found["member"]: found for found in MEMBER_LINE.finditer(top.reply)}
    assert {name: line["role"] for name, line in lines.items()} == {
        "reader": "finds and lists projects, tasks and comments (reads only)",
        "clerk": "adds (one at a time, or from a CSV file the person attached), updates, completes and deletes "
                 "tasks, and attaches files the person attached to them",
        "keeper": "creates, renames, archives and deletes projects (a delete only with your approval)",
    }
    assert top.reply.startswith("Here is what I can do for you: I hand each request to the member whose role fits")
    assert "tracker_" not in top.reply
    # Every member has an example, and the reply says what to do with its placeholders.
    assert all(line["example"] for line in lines.values()), top.reply
    assert top.reply.endswith("Put your own values where an example has <angle brackets>.")


def test_each_example_it_shows_is_handed_to_the_member_it_is_shown_for(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    Project.objects.create(owner=alice, name="Home")
    listing = ask_orchestrator(alice, "what can you do?").reply
    shown = [(found["member"], found["example"]) for found in MEMBER_LINE.finditer(listing) if found["example"]]
    assert len(shown) == 3, listing

    for name, example in shown:
        top = ask_orchestrator(alice, filled(example))

        assert top.status == "succeeded", (example, top.error)
        [asked] = worked_by(top)
        assert (asked.spec, asked.status) == (name, "succeeded"), (example, asked.spec, asked.error)


@pytest.mark.parametrize("greeting", ["hello", "good morning", "thank you"])
def test_a_greeting_is_answered_by_the_orchestrator_itself(
    alice: Any, celery_worker: WorkerProcess, greeting: str
) -> None:
    top = ask_orchestrator(alice, greeting)

    assert top.status == "succeeded", top.error
    assert not AgentRun.objects.filter(parent=top).exists()
    assert [step.kind for step in top.steps.order_by("seq")] == ["model_call"]
    assert top.reply.startswith(("Hello!", "Good morning!", "You're welcome!")), top.reply
    assert "reader, clerk or keeper" in top.reply and "can't" not in top.reply


def test_a_greeting_before_a_request_does_not_swallow_it(alice: Any, celery_worker: WorkerProcess) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")

    top = ask_orchestrator(alice, "hi, list my tasks")

    assert top.status == "succeeded", top.error
    [reader] = worked_by(top)
    assert reader.spec == "reader"
    assert "Fix the tap" in top.reply
