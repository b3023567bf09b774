"""The approval card's sentence never reveals what the person could not open themselves.

It is looked up by the person's own view, as them, through the site's middleware with their session: a
model that asks alice to delete bob's project gets a card that names nothing of bob's (not its name, not
what depends on it); a gate middleware that would refuse the person refuses the lookup; checks that only a
URL pattern's decorator makes are never bypassed; a related object outside the form's own choices shows as
the id the model sent. Through the real socket and worker where a run is involved; the model is scripted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from assistant.access.authority import SentFrom
from assistant.models import AgentRun
from assistant.testing.sockets import REPLY_ENDED, connect, receive_until
from assistant.tools import Tool, tools_for
from assistant.tools.describe import describe_call
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Comment, Project, Task

SECRET = "Bob's secret plans"


def ends_with(*types: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] in types


def ask_then_decline(socket: WebsocketCommunicator) -> list[dict[str, Any]]:
    """Send a request, decline the card it brings, and return every event the person's socket got."""

    async def scenario() -> list[dict[str, Any]]:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "delete that project"})
        events = await receive_until(socket, ends_with("assistant.confirm", *REPLY_ENDED))
        asked = events[-1]
        assert asked["type"] == "assistant.confirm", events
        step = asked["step"]
        await socket.send_json_to({"type": "assistant.confirm", "run_id": step["run_id"], "step_id": step["id"],
                                   "approve": False})
        events += await receive_until(socket, ends_with(*REPLY_ENDED))
        assert events[-1]["type"] == "assistant.replied", events[-1]
        await socket.disconnect()
        return events

    return asyncio.run(scenario())


@pytest.fixture
def bobs_project(bob: Any) -> Project:
    project = Project.objects.create(owner=bob, name=SECRET, description="the surprise party")
    for title in ("Book the hall", "Order the cake", "Invite everyone"):
        task = Task.objects.create(project=project, title=title)
        Comment.objects.create(task=task, author=bob, body="shh")
    return project


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_card_for_someone_elses_project_names_nothing_of_it(
    alice: Any, bobs_project: Project, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": bobs_project.pk}}]},
                   {"text": "I could not."})
    with assistant_settings_with(MODEL=model):
        events = ask_then_decline(connect(alice))
    asked = next(event for event in events if event["type"] == "assistant.confirm")
    assert asked["step"]["summary"] == (f"Delete the project #{bobs_project.pk} — it could not be found for you; "
                                        "the action will most likely fail.")
    # Nothing alice's socket received says anything of bob's project: not its name, not what it holds.
    seen = json.dumps(events, ensure_ascii=False)
    for secret in (SECRET, "secret", "surprise", "Book the hall", "3 tasks", "3 comments", "shh"):
        assert secret not in seen
    assert Project.objects.filter(pk=bobs_project.pk).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_gate_middleware_that_would_refuse_the_person_refuses_the_lookup(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    """The session still waits for its second factor: the site shows alice none of its pages, so the card
    does not name her project either, although it is hers."""
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Not yet."})
    with assistant_settings_with(MODEL=model):
        events = ask_then_decline(connect(alice, testapp_needs_2fa=True))
    asked = next(event for event in events if event["type"] == "assistant.confirm")
    assert asked["step"]["summary"] == (f"Delete the project #{home.pk} — the site did not let it be looked up for "
                                        "you; the action will most likely fail.")
    run = wait_for_run(asked["run_id"], "succeeded")
    assert run.steps.get(kind="tool_call").confirmation == "denied"
    assert AgentRun.objects.count() == 1


# --- in this process: the person's own view decides ---------------------------------------------------


def offered(user: Any, name: str) -> Tool:
    return next(tool for tool in tools_for(user) if tool.name == name)


@pytest.mark.django_db
@pytest.mark.parametrize("alice_is_member", [False, True], ids=["not-visible", "member-not-owner"])
def test_a_project_the_view_refuses_alice_is_never_named(
    alice: Any, bobs_project: Project, alice_is_member: bool
) -> None:
    if alice_is_member:  # she sees the project, but its delete view is for its owner only (PermissionDenied)
        bobs_project.members.add(alice)
    summary = describe_call(alice, offered(alice, "tracker_project_delete"), {"pk": bobs_project.pk})
    why = "you may not do this" if alice_is_member else "it could not be found for you"
    assert summary == f"Delete the project #{bobs_project.pk} — {why}; the action will most likely fail."


@pytest.mark.django_db
def test_a_lookup_from_a_session_that_has_ended_names_nothing(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    tab = Client()
    tab.force_login(alice)
    sent_from = SentFrom(session_key=tab.cookies["sessionid"].value, client_address="198.51.100.7",
                         origin="http://127.0.0.1:8000")
    tool = offered(alice, "tracker_project_delete")
    assert describe_call(alice, tool, {"pk": home.pk}, sent_from=sent_from) == "Delete the project “Home”"
    tab.logout()  # signed out in that browser: its session is gone
    summary = describe_call(alice, tool, {"pk": home.pk}, sent_from=sent_from)
    assert summary == f"Delete the project #{home.pk} — the session it was asked from has ended; the action will " \
                      "not run."


@pytest.mark.django_db
def test_a_check_only_the_url_pattern_makes_is_not_bypassed_by_the_lookup(alice: Any, bob: Any) -> None:
    """The view's queryset is everyone's; only the decorator around its URL pattern keeps non-staff out.
    The lookup cannot run that decorator, so it does not look the record up at all."""
    diary = Effect.objects.create(owner=bob, label="bob's diary")
    summary = describe_call(alice, offered(alice, "test_staff_delete"), {"pk": diary.pk})
    assert summary == f"Delete the effect #{diary.pk}"
    assert "diary" not in summary


@pytest.mark.django_db
def test_related_objects_outside_the_forms_own_choices_show_as_the_id_the_model_sent(
    alice: Any, bob: Any, bobs_project: Project, user_factory: Callable[..., Any]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    task = Task.objects.create(project=home, title="Fix the tap")
    stranger = user_factory("mallory-the-stranger")
    summary = describe_call(alice, offered(alice, "test_task_change"), {"pk": task.pk, "assignee": stranger.pk})
    assert summary == f"Change the task “Fix the tap”: assignee to #{stranger.pk}"

    created = describe_call(alice, offered(alice, "tracker_task_create"),
                            {"project": bobs_project.pk, "title": "Crash the party"})
    assert created == f"Create a task “Crash the party” in the project #{bobs_project.pk}"
    assert not Task.objects.filter(title="Crash the party").exists()
