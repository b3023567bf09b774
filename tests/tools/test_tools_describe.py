"""The approval card says what will happen, in words, naming the objects as the person sees them.

Through the real socket, the real worker and the real database (the model is scripted): the summary is on
the `assistant.confirm` event's step, on the step after a reload (`assistant.load`), and stays on the step
once answered. The ways a summary is made (a delete's cascade, an update's changed fields, a create, a
function view's form, a tool's own `describe=`) are then checked one by one, in this process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from assistant.models import AgentStep
from assistant.testing.sockets import REPLY_ENDED, connect, receive_until
from assistant.tools import Tool, tools_for
from assistant.tools.describe import MAX_NAME_CHARS, MAX_SUMMARY_CHARS, describe_call
from config.asgi import application
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Comment, Project, Task


def ends_with(*types: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] in types


def answer(asked: dict[str, Any], *, approve: bool) -> dict[str, Any]:
    """What the panel sends when the person clicks Approve or Deny on the card of `asked`."""
    step = asked["step"]
    return {"type": "assistant.confirm", "run_id": step["run_id"], "step_id": step["id"], "approve": approve}


@pytest.fixture
def home(alice: Any, bob: Any) -> Project:
    """Alice's project "Home" with 4 tasks (one with a comment by each of its two people); bob is a member."""
    project = Project.objects.create(owner=alice, name="Home")
    project.members.add(bob)
    tasks = [Task.objects.create(project=project, title=title)
             for title in ("Fix the tap", "Paint the door", "Buy milk", "Call the plumber")]
    Comment.objects.create(task=tasks[0], author=alice, body="The washer is worn.")
    Comment.objects.create(task=tasks[0], author=bob, body="I have a spare one.")
    return project


# --- through the socket and the worker ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_card_names_the_project_and_what_goes_with_it_and_a_reload_shows_the_same(
    alice: Any, home: Project, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted Home."})
    expected = "Delete the project “Home” and its 4 tasks and 2 comments"

    tab = connect(alice)
    # The page reloaded: the same browser session opens a new socket and asks for the chat.
    reloaded = WebsocketCommunicator(application, "/ws/assistant/", headers=list(tab.scope["headers"]))

    async def scenario() -> None:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete Home", "new_chat": True})
        events = await receive_until(tab, ends_with("assistant.confirm", *REPLY_ENDED))
        asked = events[-1]
        assert asked["type"] == "assistant.confirm", events
        assert asked["step"]["summary"] == expected
        # The step event that made it wait carries it too: the summary was written with the waiting step.
        waiting = [event["step"] for event in events if event["type"] == "assistant.step"
                   and event["step"]["state"] == "awaiting_confirmation"]
        assert [step["summary"] for step in waiting] == [expected]
        await tab.disconnect()

        assert (await reloaded.connect())[0]
        await reloaded.send_json_to({"type": "assistant.load", "request_id": "reload"})
        loaded = (await receive_until(reloaded, ends_with("assistant.messages_loaded")))[-1]
        assert loaded["pending_confirmation"]["summary"] == expected
        assert [step["summary"] for step in loaded["steps"]] == [None, expected]  # a model call has none
        await reloaded.send_json_to(answer({"step": loaded["pending_confirmation"]}, approve=True))
        events = await receive_until(reloaded, ends_with(*REPLY_ENDED))
        assert events[-1]["type"] == "assistant.replied", events
        finished = [event["step"] for event in events if event["type"] == "assistant.step"
                    and event["step"]["kind"] == "tool_call" and event["step"]["state"] == "finished"]
        assert [(step["took_effect"], step["summary"]) for step in finished] == [(True, expected)]
        await reloaded.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    assert not Project.objects.filter(pk=home.pk).exists()
    assert AgentStep.objects.get(kind="tool_call").summary == expected


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_an_updates_card_lists_the_fields_that_change_by_their_labels_and_choices(
    alice: Any, bob: Any, home: Project, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    task = home.tasks.get(title="Fix the tap")
    change = {"pk": task.pk, "title": "Fix the tap", "status": "done", "priority": 3, "assignee": bob.pk}
    model = script({"tool_calls": [{"name": "test_task_change", "arguments": change}]}, {"text": "Changed."})

    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "the tap is fixed; bob did it"})
        asked = (await receive_until(tab, ends_with("assistant.confirm", *REPLY_ENDED)))[-1]
        await tab.disconnect()
        return asked

    with assistant_settings_with(MODEL=model):
        asked = asyncio.run(scenario())
    # The title is given but unchanged, so it is not listed; the values read as the page's form shows them.
    assert asked["step"]["summary"] == "Change the task “Fix the tap”: status to “Done”, priority to “High”, " \
                                       "assignee to “bob”"
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == ("todo", None)  # nothing ran: it waits for the person


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_tool_that_describes_itself_is_described_in_its_own_words_as_the_person(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    for owner in (alice, alice, bob):
        Effect.objects.create(owner=owner, label="draft")
    model = script({"tool_calls": [{"name": "test_forget_effects", "arguments": {"label": "draft"}}]},
                   {"text": "Forgotten."})

    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "forget my drafts"})
        asked = (await receive_until(tab, ends_with("assistant.confirm", *REPLY_ENDED)))[-1]
        await tab.disconnect()
        return asked

    with assistant_settings_with(MODEL=model):
        asked = asyncio.run(scenario())
    assert asked["step"]["summary"] == "Forget your 2 records labelled “draft”"  # alice's two, not bob's
    # What the description wrote was undone with the lookup's transaction; nothing ran yet.
    assert sorted(Effect.objects.values_list("label", flat=True)) == ["draft"] * 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_view_whose_lookup_breaks_is_described_without_it_and_approve_and_deny_still_work(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_broken_delete", "arguments": {"pk": 41}},
                        {"name": "test_broken_delete", "arguments": {"pk": 42}}]},
        {"text": "That did not work."},
    )

    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete records 41 and 42"})
        first = (await receive_until(tab, ends_with("assistant.confirm", *REPLY_ENDED)))[-1]
        assert first["type"] == "assistant.confirm", first
        await tab.send_json_to(answer(first, approve=True))
        second = (await receive_until(tab, ends_with("assistant.confirm", *REPLY_ENDED)))[-1]
        assert second["type"] == "assistant.confirm", second
        await tab.send_json_to(answer(second, approve=False))
        replied = (await receive_until(tab, ends_with(*REPLY_ENDED)))[-1]
        assert replied["type"] == "assistant.replied", replied
        await tab.disconnect()
        return [first, second]

    with assistant_settings_with(MODEL=model):
        first, second = asyncio.run(scenario())
    assert first["step"]["summary"] == "Delete the effect #41 — it could not be looked up; the action may fail."
    assert second["step"]["summary"] == "Delete the effect #42 — it could not be looked up; the action may fail."
    run = wait_for_run(first["run_id"], "succeeded")
    steps = list(run.steps.filter(kind="tool_call").order_by("seq"))
    # Approved: the view ran and failed on its own; denied: declined. The lookup's write was undone both times
    # (the approved call's own write went with its failed request).
    assert [(step.confirmation, step.result["status"]) for step in steps] == [("approved", "error"),
                                                                              ("denied", "declined")]
    assert not Effect.objects.exists()


# --- each way of describing, in this process ------------------------------------------------------------


def offered(user: Any, name: str) -> Tool:
    return next(tool for tool in tools_for(user) if tool.name == name)


@pytest.mark.django_db
def test_a_create_names_the_new_object_and_where_it_goes(alice: Any, home: Project) -> None:
    summary = describe_call(alice, offered(alice, "tracker_task_create"),
                            {"project": "Home", "title": "Buy bread", "priority": 3, "due_date": "2026-12-24"})
    assert summary == "Create a task “Buy bread” in the project “Home”: priority “High”, due date “2026-12-24”"
    assert not Task.objects.filter(title="Buy bread").exists()


@pytest.mark.django_db
def test_a_function_view_with_a_form_says_its_description_and_the_arguments_by_label(
    alice: Any, home: Project
) -> None:
    summary = describe_call(alice, offered(alice, "tracker_project_archive"), {"pk": home.pk, "archived": True})
    assert summary == ("Archive a project you own (archived=true) or bring it back (archived=false): "
                       f"the project #{home.pk}, archived “yes”")


@pytest.mark.django_db
def test_a_function_views_argument_is_named_by_its_description_not_by_the_model_the_view_makes(
    alice: Any, home: Project
) -> None:
    # The comment form's view takes the task's id: the card must not call it a comment's.
    task = home.tasks.get(title="Paint the door")
    summary = describe_call(alice, offered(alice, "tracker_comment_create"), {"pk": task.pk, "body": "Done."})
    assert summary.startswith(f"Add a comment to a task, by the task's id: the task #{task.pk}, ")
    assert "the comment #" not in summary and "“Done.”" in summary


@pytest.mark.django_db
def test_another_single_object_view_says_its_description_and_names_the_object(alice: Any, home: Project) -> None:
    task = home.tasks.get(title="Paint the door")
    summary = describe_call(alice, offered(alice, "tracker_task_detail"), {"pk": task.pk})
    assert summary == "One task's details, by its id — the task “Paint the door”"


@pytest.mark.django_db
def test_an_update_that_changes_nothing_says_so(alice: Any, home: Project) -> None:
    task = home.tasks.get(title="Buy milk")
    summary = describe_call(alice, offered(alice, "test_task_change"), {"pk": task.pk, "status": "todo"})
    assert summary == "Change the task “Buy milk”: nothing would change (the values given are its current ones)"


@pytest.mark.django_db
def test_names_are_cut_short_and_the_sentence_is_bounded(alice: Any) -> None:
    long_name = "A project whose name goes on " + "and on " * 10
    project = Project.objects.create(owner=alice, name=long_name[:100])
    task = Task.objects.create(project=project, title="T" * 200)
    change = {"pk": task.pk, "title": "U" * 200, "description": "D" * 3000, "status": "doing", "priority": 3,
              "due_date": "2027-01-01", "estimate_hours": 12.5}
    summary = describe_call(alice, offered(alice, "test_task_change"), change)
    assert len(summary) <= MAX_SUMMARY_CHARS and summary.endswith("…")
    cut = MAX_NAME_CHARS - 1
    assert summary.startswith(f"Change the task “{'T' * cut}…”: title to “{'U' * cut}…”, description to “DDD")
    deleted = describe_call(alice, offered(alice, "tracker_project_delete"), {"pk": project.pk})
    assert deleted == f"Delete the project “{long_name[:MAX_NAME_CHARS - 1].rstrip()}…” and its 1 task"
