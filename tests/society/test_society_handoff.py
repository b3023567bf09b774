"""Handoff and routing through the real socket, worker and database: a member asked alone answers the person
itself (streamed as the reply, stored once naming the member, the asker making no further model call), a plain
request goes to its member with no model call at all, and neither shortcut survives an answer that did not come.

`test-router` asks `test-viewer` (reads), `test-clerk` (task writes) and `test-desk` (projects; it asks the clerk),
all on the suite's fake provider, which answers calls in the order they are made (tests/settings.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings

from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import REPLY_ENDED, connect, receive_until
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def top_ended() -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] in REPLY_ENDED and "parent_run_id" not in event


def ask(user: Any, chat: AgentChat, content: str) -> list[dict[str, Any]]:
    """Send `content` in `chat` through the socket; every event until the top run ended."""
    tab = connect(user)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": content, "chat_id": chat.pk})
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        return events

    return asyncio.run(scenario())


def load(user: Any, chat: AgentChat) -> dict[str, Any]:
    tab = connect(user)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.load", "chat_id": chat.pk})
        [loaded] = await receive_until(tab, lambda event: event["type"] == "assistant.messages_loaded", timeout=10)
        await tab.disconnect()
        return loaded

    return asyncio.run(scenario())


def model_calls(run: AgentRun) -> int:
    return run.steps.filter(kind=AgentStep.Kind.MODEL_CALL).count()


def test_a_member_asked_alone_answers_the_person_itself_and_the_asker_makes_no_further_call(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the fence")
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "List the person's open tasks."})]),
        openai_stream([], [("v1", "tracker_task_list", {})]),
        openai_stream(["You have one open task: ", "Fix the fence."]),
    )
    with assistant_settings_with(SPECS=router_deciding()):
        events = ask(alice, chat, "what's on my plate?")

    top = AgentRun.objects.get(pk=events[-1]["run_id"])
    [viewer] = AgentRun.objects.filter(parent=top)
    answer = "You have one open task: Fix the fence."
    assert (top.status, top.reply, top.answered_by_id) == ("succeeded", answer, viewer.pk)
    assert (viewer.status, viewer.reply) == ("succeeded", answer)
    # Three model calls, as one assistant makes two and the routing one: the asker's answer is the member's.
    assert len(fake_openai.bodies) == 3
    assert (model_calls(top), model_calls(viewer)) == (1, 2)
    asked = top.steps.get(tool_name="ask_test-viewer")
    assert (asked.result["status"], asked.result["hands_over"]) == ("answered", True)
    # The member's text streamed to the person as the reply, and the reply is said once, naming the member.
    streamed = [event for event in events if event["type"] == "assistant.token"]
    assert "".join(event["delta"] for event in streamed) == answer
    assert all(event["run_id"] == viewer.pk and event["answers_person"] for event in streamed)
    [replied] = [event for event in events if event["type"] == "assistant.replied"]
    assert (replied["run_id"], replied["message"]["content"], replied["message"]["member"]) == (
        top.pk, answer, "test-viewer")
    assert list(AgentMessage.objects.filter(chat=chat, role="assistant").values_list("content", "member")) == [
        (answer, "test-viewer")]
    # A reload shows the same one reply, naming the member.
    loaded = load(alice, chat)
    assert [(message["content"], message["member"]) for message in loaded["messages"]
            if message["role"] == "assistant"] == [(answer, "test-viewer")]
    # Each run filed once in its own profile; the member's entry says its answer went to the person.
    windows = {profile.spec_name: profile.window for profile in AgentProfile.objects.filter(owner=alice)}
    assert [entry["run_id"] for entry in windows["test-router"]] == [top.pk]
    [entry] = windows["test-viewer"]
    assert (entry["run_id"], entry["handoff"], entry["asked_by"]) == (viewer.pk, "person", "test-router")


def test_a_plain_request_becomes_its_members_run_without_a_model_call_and_a_notice_says_why(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Buy milk"})]),
        openai_stream(["Added “Buy milk” to Home."]),
    )
    events = ask(alice, chat, "Add the task 'Buy milk' to the project 'Home'")

    # One run, the clerk's, with as many model calls as one assistant makes: the router's model was never asked.
    [run] = AgentRun.objects.filter(chat=chat)
    answer = "Added “Buy milk” to Home."
    assert (run.pk, run.status, run.reply, run.spec, run.routed_from, run.parent_id) == (
        events[-1]["run_id"], "succeeded", answer, "test-clerk", "test-router", None)
    assert len(fake_openai.bodies) == 2 and model_calls(run) == 2
    assert Task.objects.filter(project=home, title="Buy milk").count() == 1
    # Its first step, written and shown before the clerk's model was asked, says why it went to the clerk.
    first = run.steps.order_by("seq").first()
    assert first is not None and (first.kind, first.reason) == (
        "notice", "routed to test-clerk: intent tracker_task_create, the only member that may do it")
    shown = [event["step"] for event in events if event["type"] == "assistant.step"]
    assert (shown[0]["kind"], shown[0]["reason"]) == ("notice", first.reason)
    # The clerk worked with its own tools and the person's own words, and its answer is the reply, naming it.
    offered = json.dumps(fake_openai.bodies[0]["tools"])
    assert "tracker_task_create" in offered and "ask_test-" not in offered
    assert "Add the task 'Buy milk' to the project 'Home'" in json.dumps(fake_openai.bodies[0]["messages"])
    streamed = "".join(event["delta"] for event in events if event["type"] == "assistant.token")
    [replied] = [event for event in events if event["type"] == "assistant.replied"]
    assert (streamed, replied["message"]["content"], replied["message"]["member"]) == (answer, answer, "test-clerk")
    assert [(message["content"], message["member"]) for message in load(alice, chat)["messages"]
            if message["role"] == "assistant"] == [(answer, "test-clerk")]
    # Filed once, in the clerk's profile, saying who routed it there; nothing in the router's.
    windows = {profile.spec_name: profile.window for profile in AgentProfile.objects.filter(owner=alice)}
    [entry] = windows["test-clerk"]
    assert (entry["run_id"], entry["routed_by"], entry["handoff"], entry["intent"]) == (
        run.pk, "test-router", "person", "tracker_task_create")
    assert "test-router" not in windows


def test_a_request_two_members_may_do_goes_to_the_one_with_least_authority_and_greetings_are_not_routed(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("v1", "tracker_task_list", {})]),
        openai_stream(["Nothing is open."]),
        openai_stream(["Hello! Ask me about your tasks and projects."]),
    )
    listed = AgentRun.objects.get(pk=ask(alice, chat, "list my open tasks")[-1]["run_id"])
    assert (listed.spec, listed.routed_from, listed.reply, model_calls(listed)) == (
        "test-viewer", "test-router", "Nothing is open.", 2)
    assert listed.steps.order_by("seq")[0].reason == (
        "routed to test-viewer: intent tracker_task_list, the member that may do it with the least authority "
        "(restricted)")
    greeted = AgentRun.objects.get(pk=ask(alice, chat, "hello!")[-1]["run_id"])
    assert (greeted.spec, greeted.reply, model_calls(greeted)) == (
        "test-router", "Hello! Ask me about your tasks and projects.", 1)
    assert not AgentRun.objects.filter(parent=greeted).exists()
    # The greeting's model call read the routed turn as the conversation it is: the person's words, the answer.
    assert "Nothing is open." in json.dumps(fake_openai.bodies[2]["messages"])


def test_a_handoff_two_members_deep_names_the_member_that_wrote_the_answer(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        # The router's model asks the desk alone, in words that name no one tool (the desk's model decides); the
        # desk's model asks the clerk alone.
        openai_stream([], [("a1", "ask_test-desk", {"task": "The garden needs digging: put that on its list."})]),
        openai_stream([], [("d1", "ask_test-clerk", {"task": "Add the task 'Dig' to the project 'Garden'."})]),
        openai_stream([], [("c1", "tracker_task_create", {"project": garden.pk, "title": "Dig"})]),
        openai_stream(["Added “Dig” to Garden."]),
    )
    with assistant_settings_with(SPECS=router_deciding()):
        events = ask(alice, chat, "The garden needs digging: put that on its list.")

    top = AgentRun.objects.get(pk=events[-1]["run_id"])
    [desk] = AgentRun.objects.filter(parent=top)
    [clerk] = AgentRun.objects.filter(parent=desk)
    answer = "Added “Dig” to Garden."
    assert [(run.spec, run.depth, run.reply, run.answered_by_id) for run in (top, desk, clerk)] == [
        ("test-router", 0, answer, clerk.pk), ("test-desk", 1, answer, clerk.pk), ("test-clerk", 2, answer, None)]
    # One model call more at each level than one assistant makes: each asker's answer is its member's.
    assert [model_calls(run) for run in (top, desk, clerk)] == [1, 1, 2]
    assert top.steps.get(tool_name="ask_test-desk").result["written_by"] == "test-clerk"
    assert len(fake_openai.bodies) == 4
    # The clerk two levels down wrote to the person: its text streamed as the reply.
    streamed = [event for event in events if event["type"] == "assistant.token"]
    assert {(event["run_id"], event.get("answers_person")) for event in streamed} == {(clerk.pk, True)}
    assert list(AgentMessage.objects.filter(chat=chat, role="assistant").values_list("member", flat=True)) == [
        "test-clerk"]
    entries = {profile.spec_name: profile.window[-1] for profile in AgentProfile.objects.filter(owner=alice)}
    assert (entries["test-desk"]["handoff"], entries["test-clerk"]["handoff"]) == ("person", "person")


def test_a_member_asked_a_plain_request_becomes_its_own_members_run_whose_answer_reaches_the_person(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        # The router's model asks the desk; the task is plainly the clerk's, so the desk's run becomes the clerk's.
        openai_stream([], [("a1", "ask_test-desk", {"task": "Add the task 'Dig' to the project 'Garden'."})]),
        openai_stream([], [("c1", "tracker_task_create", {"project": garden.pk, "title": "Dig"})]),
        openai_stream(["Added “Dig” to Garden."]),
    )
    with assistant_settings_with(SPECS=router_deciding()):
        events = ask(alice, chat, "The garden needs digging: put that on its list.")

    top = AgentRun.objects.get(pk=events[-1]["run_id"])
    [member] = AgentRun.objects.filter(parent=top)
    answer = "Added “Dig” to Garden."
    assert (member.spec, member.routed_from, member.depth, member.task) == (
        "test-clerk", "test-desk", 1, "Add the task 'Dig' to the project 'Garden'.")
    assert (top.reply, top.answered_by_id, member.reply) == (answer, member.pk, answer)
    assert [model_calls(run) for run in (top, member)] == [1, 2] and len(fake_openai.bodies) == 3
    assert member.steps.order_by("seq")[0].reason.startswith("routed to test-clerk: intent tracker_task_create")
    assert top.steps.get(tool_name="ask_test-desk").result["written_by"] == "test-clerk"
    streamed = [event for event in events if event["type"] == "assistant.token"]
    assert {(event["run_id"], event.get("answers_person")) for event in streamed} == {(member.pk, True)}
    assert list(AgentMessage.objects.filter(chat=chat, role="assistant").values_list("member", flat=True)) == [
        "test-clerk"]
    [entry] = AgentProfile.objects.get(owner=alice, spec_name="test-clerk").window
    assert (entry["run_id"], entry["asked_by"], entry["routed_by"], entry["handoff"]) == (
        member.pk, "test-router", "test-desk", "person")
    assert not AgentProfile.objects.filter(owner=alice, spec_name="test-desk").exists()


def test_an_answer_that_did_not_come_goes_back_to_the_asker_which_answers_the_person(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "Add the task 'Sneaky' to Home."})]),
        openai_stream([], [("v1", "tracker_task_create", {"project": home.pk, "title": "Sneaky"})]),
        openai_stream(["I may only read; I could not add it."]),
        openai_stream(["The reader could not add it; nothing was added."]),
    )
    with assistant_settings_with(SPECS=router_deciding()):
        events = ask(alice, chat, "sneak a task in")

    top = AgentRun.objects.get(pk=events[-1]["run_id"])
    assert (top.reply, top.answered_by_id, model_calls(top)) == (
        "The reader could not add it; nothing was added.", None, 2)
    assert top.steps.get(tool_name="ask_test-viewer").result["status"] == "escalated"
    assert list(AgentMessage.objects.filter(chat=chat, role="assistant").values_list("member", flat=True)) == [""]
    # The member's own text was its asker's to read, never streamed to the person as the reply.
    assert not [event for event in events if event.get("answers_person")]


def test_the_asking_model_may_keep_a_members_answer_and_a_spec_may_never_hand_over(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    specs = router_deciding()
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "List my tasks.", "return_answer": True})]),
        openai_stream(["None."]),
        openai_stream(["You have no tasks."]),
    )
    with assistant_settings_with(SPECS=specs):
        kept = AgentRun.objects.get(pk=ask(alice, chat, "tasks?")[-1]["run_id"])
    assert (kept.reply, kept.answered_by_id, model_calls(kept)) == ("You have no tasks.", None, 2)

    never = {**specs, "test-router": {**specs["test-router"], "handoff": "never"}}
    fake_openai.queue(
        openai_stream([], [("a2", "ask_test-viewer", {"task": "List my tasks."})]),
        openai_stream(["None."]),
        openai_stream(["Still no tasks."]),
    )
    with assistant_settings_with(SPECS=never):
        relayed = AgentRun.objects.get(pk=ask(alice, chat, "and now?")[-1]["run_id"])
    assert (relayed.reply, relayed.answered_by_id) == ("Still no tasks.", None)
    # A spec that never hands over offers no way to ask for the answer back: there is nothing to decline.
    offered = {tool["function"]["name"]: tool for tool in fake_openai.bodies[-3]["tools"]}
    assert "return_answer" not in offered["ask_test-viewer"]["function"]["parameters"]["properties"]


def router_deciding() -> dict[str, Any]:
    """The suite's specs with `test-router`'s routing off: its model decides whom to ask, as the tests script it."""
    specs = dict(settings.ASSISTANT["SPECS"])
    return {**specs, "test-router": {**specs["test-router"], "routing": "never"}}


def test_stop_while_the_handed_over_member_writes_stops_the_tree_and_stores_no_reply(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "List the person's open tasks."})]),
        openai_stream([], [("v1", "tracker_task_list", {})]),
        openai_stream([f"word{i} " for i in range(60)]),
    )
    fake_openai._replies[-1].sse_interval = 0.2  # the member writes to the person for 12 s
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "list my open tasks", "chat_id": chat.pk})
        first = (await receive_until(tab, lambda e: e["type"] == "assistant.token" and e.get("answers_person"),
                                     timeout=30))[-1]
        await tab.send_json_to({"type": "assistant.cancel", "run_id": first["root_run_id"]})
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        return events

    with assistant_settings_with(SPECS=router_deciding()):
        events = asyncio.run(scenario())
    top = AgentRun.objects.get(pk=events[-1]["run_id"])
    [viewer] = AgentRun.objects.filter(parent=top)
    viewer = wait_for_run(viewer.pk, *AgentRun.ENDED_STATUSES)
    assert (top.status, viewer.status, top.answered_by_id) == ("cancelled", "cancelled", None)
    assert not AgentMessage.objects.filter(chat=chat, role="assistant").exists()
    assert events[-1]["type"] == "assistant.cancelled"
