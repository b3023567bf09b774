"""A run hands work to members through the real socket, worker and database: the member works as the same
person under its own spec, its answer (or why it could not go on) comes back to the run that asked it as
data, an approval it needs reaches the person's panel naming it, and stopping or signing out ends the tree.

The society is the test settings' own (tests/settings.py): `test-asker` may ask `test-viewer` (restricted),
`test-clerk` (task writes, deletes with approval) and `test-keeper` (projects; it may ask the clerk). Every
spec's model is the fake provider, which answers the calls in the order they are made.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import ORIGIN, REPLY_ENDED, connect, receive_until, signed_in_client
from config.asgi import application
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]



def top_ended(events: list[Any] | None = None) -> Callable[[dict[str, Any]], bool]:
    """The end of the top run (a member's end names the run that asked it)."""
    return lambda event: event["type"] in REPLY_ENDED and "parent_run_id" not in event


def asker_chat(user: Any) -> AgentChat:
    return AgentChat.objects.create(owner=user, spec="test-asker")


def the_tree(top_id: int) -> tuple[AgentRun, list[AgentRun]]:
    top = AgentRun.objects.get(pk=top_id)
    return top, list(AgentRun.objects.filter(root=top).order_by("pk"))


def tool_steps(run: AgentRun) -> list[AgentStep]:
    return list(run.steps.filter(kind="tool_call").order_by("seq"))


def test_a_restricted_members_write_is_denied_and_the_asker_hears_why(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-viewer", {"task": "Add the task 'Sneaky' to the project Home.",
                                                       "context": f"Home is project {home.pk}."})]),
        openai_stream([], [("r1", "tracker_task_create", {"project": home.pk, "title": "Sneaky"})]),
        openai_stream(["I may only read; I could not add it."]),
        openai_stream(["The reader may not add tasks, so nothing was added."]),
    )
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "add Sneaky to Home", "chat_id": chat.pk})
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        return events

    events = asyncio.run(scenario())
    top, members = the_tree(events[-1]["run_id"])
    assert (top.status, top.reply) == ("succeeded", "The reader may not add tasks, so nothing was added.")
    [viewer] = members
    assert (viewer.spec, viewer.parent_id, viewer.depth, viewer.status) == ("test-viewer", top.pk, 1, "succeeded")
    assert not Task.objects.filter(title="Sneaky").exists()
    [denied] = tool_steps(viewer)
    assert (denied.tool_name, denied.result["status"], denied.took_effect) == ("tracker_task_create", "denied", False)

    # The asker's step for the delegation: the member's answer, as an escalation naming what failed.
    [asked] = tool_steps(top)
    assert viewer.asked_in_id == asked.pk
    assert (asked.tool_name, asked.state, asked.result["status"], asked.took_effect) == (
        "ask_test-viewer", "finished", "escalated", False)
    assert "tracker_task_create" in asked.result["reason"]
    assert asked.result["problems"][0]["status"] == "denied"
    assert asked.result["answer"] == "I may only read; I could not add it."
    # The member was asked the task with the context passed, and nothing of the chat.
    member_prompt = json.dumps(fake_openai.bodies[1]["messages"])
    assert "Sneaky" in member_prompt and f"Home is project {home.pk}." in member_prompt
    assert "add Sneaky to Home" not in member_prompt
    # Its answer reached the asker's model as a tool result (data), never in the system prompt.
    final = fake_openai.bodies[3]["messages"]
    assert "escalated" in final[-1]["content"] and final[-1]["role"] == "tool"
    assert "escalated" not in final[0]["content"]

    # The panel saw the member's steps live, each naming the member and the step that asked it.
    member_steps = [event for event in events if event["type"] == "assistant.step" and event["run_id"] == viewer.pk]
    assert member_steps and all(event["member"] == "test-viewer" and event["asked_in"] == asked.pk
                                and event["parent_run_id"] == top.pk for event in member_steps)
    # Each run filed once, in its own spec's profile; the member's entry says who asked it.
    [top_entry] = AgentProfile.objects.get(owner=alice, spec_name="test-asker").window
    [viewer_entry] = AgentProfile.objects.get(owner=alice, spec_name="test-viewer").window
    assert (top_entry["run_id"], viewer_entry["run_id"], viewer_entry["asked_by"]) == (top.pk, viewer.pk, "test-asker")


def test_a_members_approval_reaches_the_panel_naming_it_and_answers_only_its_step(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chore = Task.objects.create(project=home, title="Old chore")
    keep = Task.objects.create(project=home, title="Keep me")
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": f"Delete the task {chore.pk}."})]),
        openai_stream([], [("k1", "tracker_task_delete", {"pk": chore.pk})]),
        openai_stream(["Deleted it."]),
        openai_stream(["The clerk deleted the old chore."]),
    )
    tab = connect(alice)
    other_tab = WebsocketCommunicator(application, "/ws/assistant/", headers=list(tab.scope["headers"]))

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete the old chore", "chat_id": chat.pk})
        asked = (await receive_until(tab, lambda e: e["type"] == "assistant.confirm", timeout=30))[-1]
        # The run that asked pauses once it has handed the work over, which the member's question can beat.
        await database_sync_to_async(wait_for)(lambda: AgentRun.objects.filter(
            chat=chat, parent=None, status=AgentRun.Status.AWAITING_MEMBERS).exists(),
            what="the asking run to wait for its member")
        # A reload in another tab shows the same question, from the member, nested in the tree.
        assert (await other_tab.connect())[0]
        await other_tab.send_json_to({"type": "assistant.load", "chat_id": chat.pk})
        loaded = (await receive_until(other_tab, lambda e: e["type"] == "assistant.messages_loaded"))[-1]
        await tab.send_json_to({"type": "assistant.confirm", "run_id": asked["run_id"],
                                "step_id": asked["step"]["id"], "approve": True})
        await receive_until(tab, lambda e: e["type"] == "assistant.step" and e["step"]["id"] == asked["step"]["id"]
                            and e["step"]["confirmation"] == "approved")
        # The other tab answers the same card again: refused, nothing runs twice.
        await other_tab.send_json_to({"type": "assistant.confirm", "run_id": asked["run_id"],
                                      "step_id": asked["step"]["id"], "approve": True})
        stale = (await receive_until(other_tab, lambda e: e["type"] == "assistant.error"))[-1]
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        await other_tab.disconnect()
        return events, asked, loaded, [stale]

    events, asked, loaded, [stale] = asyncio.run(scenario())
    top, [clerk] = the_tree(events[-1]["run_id"])
    # The card is the member's own step, and says which member asks.
    assert (asked["run_id"], asked["member"], asked["parent_run_id"]) == (clerk.pk, "test-clerk", top.pk)
    assert asked["step"]["tool_name"] == "tracker_task_delete"
    assert loaded["active_run"]["id"] == top.pk and loaded["active_run"]["status"] == "awaiting_members"
    assert loaded["pending_confirmation"]["id"] == asked["step"]["id"]
    assert [member["id"] for member in loaded["members"]] == [clerk.pk]
    assert loaded["members"][0]["asked_in"] == loaded["steps"][-1]["id"]
    assert stale["code"] == "stale_confirmation"
    assert (top.status, clerk.status, top.reply) == ("succeeded", "succeeded", "The clerk deleted the old chore.")
    assert not Task.objects.filter(pk=chore.pk).exists() and Task.objects.filter(pk=keep.pk).exists()
    [deleted] = tool_steps(clerk)
    assert (deleted.confirmation, deleted.took_effect) == ("approved", True)
    [delegated] = tool_steps(top)
    assert (delegated.result["status"], delegated.took_effect) == ("answered", True)


def test_stopping_the_top_run_stops_the_member_at_work(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List my tasks slowly."})]),
        openai_stream([f"word{i} " for i in range(60)]),
    )
    fake_openai._replies[-1].sse_interval = 0.2  # the member streams for 12 s
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "list my tasks", "chat_id": chat.pk})
        # The member is at work: its first streamed words have arrived.
        first = (await receive_until(tab, lambda e: e["type"] == "assistant.token" and "member" in e, timeout=30))[-1]
        await tab.send_json_to({"type": "assistant.cancel", "run_id": first["parent_run_id"]})
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        return events

    events = asyncio.run(scenario())
    top, [clerk] = the_tree(events[-1]["run_id"])
    clerk = wait_for_run(clerk.pk, *AgentRun.ENDED_STATUSES)
    assert (top.status, top.stop_reason, clerk.status, clerk.stop_reason) == (
        "cancelled", "cancelled", "cancelled", "cancelled")
    [asked] = tool_steps(top)
    assert (asked.state, asked.result["status"]) == ("finished", "member_stopped")
    # Each filed once in its profile, stopped as it was.
    assert [e["run_id"] for e in AgentProfile.objects.get(owner=alice, spec_name="test-clerk").window] == [clerk.pk]
    assert [e["run_id"] for e in AgentProfile.objects.get(owner=alice, spec_name="test-asker").window] == [top.pk]


def test_signing_out_stops_the_member_at_work_and_the_run_that_asked_it(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List my tasks slowly."})]),
        openai_stream([], [("k1", "tracker_task_list", {})]),
        openai_stream([f"word{i} " for i in range(60)]),
    )
    fake_openai._replies[-1].sse_interval = 0.2
    browser = signed_in_client(alice)
    cookie = (b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode())
    tab = WebsocketCommunicator(application, "/ws/assistant/", headers=[ORIGIN, cookie])

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "list my tasks", "chat_id": chat.pk})
        token = (await receive_until(tab, lambda e: e["type"] == "assistant.token" and "member" in e, timeout=30))[-1]
        await tab.disconnect()
        return token

    first = asyncio.run(scenario())
    browser.logout()  # the person signs out in another tab of the same browser session
    top = wait_for_run(first["parent_run_id"], *AgentRun.ENDED_STATUSES)
    clerk = wait_for_run(first["run_id"], *AgentRun.ENDED_STATUSES)
    assert (top.status, top.stop_reason) == ("cancelled", "session_ended")
    assert (clerk.status, clerk.stop_reason) == ("cancelled", "session_ended")
    # Neither acts for anybody any more: the sealed session went with each run's end.
    assert (bytes(top.session_sealed), bytes(clerk.session_sealed)) == (b"", b"")
    assert tool_steps(top)[0].result["status"] == "member_stopped"


def test_a_member_cannot_ask_a_spec_already_on_its_path(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-keeper", {"task": "Ask the asker to do it."})]),
        # The keeper may ask the clerk; the asker above it is not offered, whatever its model calls.
        openai_stream([], [("k1", "ask_test-asker", {"task": "Do it yourself."})]),
        openai_stream(["I could not hand it back."]),
        openai_stream(["Nobody did it."]),
    )
    sent = chat_send(user=alice, content="go round in a circle", chat_id=chat.pk)
    top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES)
    [keeper] = AgentRun.objects.filter(root=top)
    assert (top.status, keeper.status) == ("succeeded", "succeeded")
    [refused] = tool_steps(keeper)
    assert (refused.tool_name, refused.took_effect) == ("ask_test-asker", False)
    assert refused.result["status"] in AgentStep.FAILED_OUTCOMES
    # Nothing was started for it: the tree is the asker and the keeper.
    assert AgentRun.objects.filter(chat=chat).count() == 2
    offered = {tool["function"]["name"] for tool in fake_openai.bodies[1]["tools"]}
    assert "ask_test-clerk" in offered and "ask_test-asker" not in offered


def counted_provider(member_text: str, member_writes: int) -> Callable[[dict[str, Any]], Any]:
    """The fake provider's answer to any call not queued, with usage as a provider counts it (the prompt is what
    was sent, four characters a token): the asker (offered ask_ tools) answers in words; a member writes
    `member_text`, `member_writes` tokens, and lists tasks again (another search each time), until its budget
    stops it."""
    searches = itertools.count(1)

    def reply(body: dict[str, Any]) -> Any:
        prompt = len(json.dumps([body["messages"], body.get("tools")])) // 4
        if any(tool["function"]["name"].startswith("ask_") for tool in body.get("tools") or []):
            return openai_stream(["The members ran out of budget."], usage=(prompt, 10))
        call = ("l1", "tracker_task_list", {"search": f"s{next(searches)}"})
        return openai_stream([member_text], [call], usage=(prompt, member_writes))

    return reply


def test_members_asked_at_once_share_a_small_token_budget_and_the_tree_stays_within_it(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = asker_chat(alice)
    budget, first_call = 20_000, (1_500, 40)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List tasks, again and again."}),
                           ("a2", "ask_test-viewer", {"task": "List tasks, again and again."})], usage=first_call),
    )
    fake_openai.default_reply = counted_provider("Listed them.", 40)  # type: ignore[method-assign]
    try:
        with assistant_settings_with(MAX_TOKENS_PER_RUN=budget):
            sent = chat_send(user=alice, content="list in parallel", chat_id=chat.pk)
        top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)
    finally:
        del fake_openai.default_reply
    members = list(AgentRun.objects.filter(root=top))
    assert top.status == "succeeded", top.error
    assert sorted(member.spec for member in members) == ["test-clerk", "test-viewer"]
    # Reserved before either started: together no more than what the asker had left.
    assert sum(member.config["max_tokens_per_run"] for member in members) <= budget - sum(first_call)
    assert [(member.status, member.stop_reason) for member in members] == [("failed", "max_tokens")] * 2
    # Each listed, and listed again, within its share.
    assert [member.model_calls >= 2 for member in members] == [True, True], [
        (member.model_calls, member.total_tokens, member.config["max_tokens_per_run"]) for member in members]
    used = sum(step.prompt_tokens + step.completion_tokens
               for step in AgentStep.objects.filter(run__in=[top, *members]))
    assert used <= budget
    assert {step.result["status"] for step in tool_steps(top)} == {"escalated"}


def test_a_tree_deeper_than_the_limit_is_refused_where_it_would_go_too_deep(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = AgentChat.objects.create(owner=alice, spec="test-chain-a")
    fake_openai.queue(
        *[openai_stream([], [(f"c{depth}", f"ask_test-chain-{name}", {"task": "Pass it on."})])
          for depth, name in enumerate("bcde")],
        # d is 3 deep, the most a tree may go: it was offered no member, and its call asks for none.
        openai_stream(["Nobody below me."]), openai_stream(["c heard."]), openai_stream(["b heard."]),
        openai_stream(["a heard."]),
    )
    top = wait_for_run(chat_send(user=alice, content="pass it down", chat_id=chat.pk).run.pk, *AgentRun.ENDED_STATUSES)
    assert (top.status, top.reply) == ("succeeded", "a heard.")
    runs = {run.spec: run for run in AgentRun.objects.filter(root=top)}
    assert sorted(runs) == ["test-chain-b", "test-chain-c", "test-chain-d"]
    assert [runs[f"test-chain-{name}"].depth for name in "bcd"] == [1, 2, 3]
    [too_deep] = tool_steps(runs["test-chain-d"])
    assert (too_deep.tool_name, too_deep.took_effect) == ("ask_test-chain-e", False)
    assert too_deep.result["status"] in AgentStep.FAILED_OUTCOMES
    offered = [{tool["function"]["name"] for tool in body.get("tools", [])} for body in fake_openai.bodies[:4]]
    assert "ask_test-chain-b" in offered[0] and "ask_test-chain-e" not in offered[3]


def test_a_member_cannot_use_a_tool_its_spec_leaves_out_though_its_asker_and_profile_would_allow_it(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = asker_chat(alice)
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "Make a project called Side."})]),
        # The clerk's spec has task tools only; its standard profile would allow a project write.
        openai_stream([], [("k1", "tracker_project_create", {"name": "Side", "description": ""})]),
        openai_stream(["I could not make it."]),
        openai_stream(["The clerk may not make projects."]),
    )
    top = wait_for_run(chat_send(user=alice, content="make Side", chat_id=chat.pk).run.pk, *AgentRun.ENDED_STATUSES)
    [clerk] = AgentRun.objects.filter(root=top)
    [refused] = tool_steps(clerk)
    assert (refused.tool_name, refused.result["status"], refused.took_effect) == (
        "tracker_project_create", "denied", False)
    assert not Project.objects.filter(name="Side").exists()
    # It was never offered to the clerk's model either.
    offered = {tool["function"]["name"] for tool in fake_openai.bodies[1]["tools"]}
    assert "tracker_project_create" not in offered
    assert tool_steps(top)[0].result["status"] == "escalated"


def test_eight_members_writing_long_answers_keep_the_tree_within_its_token_budget(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    """Each member's model writes ~9,000 tokens a call, and its prompt grows by that much with every call, as a
    provider counts it: a call is predicted from what it will send, so no member passes its share and the tree
    stays within its top run's budget (predicting the next call from the previous one's size let each member
    make one call too many: 250,444 tokens against 200,000)."""
    budget, long_answer = 200_000, "All of this is needed. " * 1_565  # ~36,000 characters, ~9,000 tokens

    fake_openai.queue(openai_stream([], [(f"a{index}", "ask_test-viewer", {"task": f"Report {index} at length."})
                                         for index in range(8)], usage=(1_500, 400)))
    fake_openai.default_reply = counted_provider(long_answer, 9_000)  # type: ignore[method-assign]
    try:
        with assistant_settings_with(MAX_TOKENS_PER_RUN=budget, MAX_MODEL_CALLS=40, MAX_TOOL_CALLS=60):
            sent = chat_send(user=alice, content="eight reports", chat_id=asker_chat(alice).pk)
        top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=120)
    finally:
        del fake_openai.default_reply
    members = list(AgentRun.objects.filter(root=top))
    tree = sum(step.prompt_tokens + step.completion_tokens
               for step in AgentStep.objects.filter(run__in=[top, *members]))
    assert tree <= budget
    assert len(members) == 8 and top.status == "succeeded", (top.status, top.error)
    for member in members:
        used = sum(step.prompt_tokens + step.completion_tokens for step in member.steps.all())
        assert used <= member.config["max_tokens_per_run"], (member.pk, used, member.config["max_tokens_per_run"])
        assert member.stop_reason == "max_tokens"


def test_an_approval_two_members_deep_reaches_the_panel_and_answers_only_its_step(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    """The asker asks the keeper, the keeper asks the clerk, and the clerk's delete waits for the person: the card
    names the clerk and the run that asked it, an answer naming another run of the tree is refused, and the
    approval runs exactly that step; each asking step then says its member answered and acted."""
    home = Project.objects.create(owner=alice, name="Home")
    chore = Task.objects.create(project=home, title="Old chore")
    keep = Task.objects.create(project=home, title="Keep me")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-keeper", {"task": "Have the old chore deleted."})]),
        openai_stream([], [("k1", "ask_test-clerk", {"task": f"Delete the task {chore.pk}."})]),
        openai_stream([], [("c1", "tracker_task_delete", {"pk": chore.pk})]),
        openai_stream(["Deleted it."]),
        openai_stream(["The clerk deleted it."]),
        openai_stream(["The old chore is gone."]),
    )
    chat = asker_chat(alice)
    tab = connect(alice)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete the old chore", "chat_id": chat.pk})
        asked = (await receive_until(tab, lambda e: e["type"] == "assistant.confirm", timeout=30))[-1]
        # The same step answered as if it were the keeper's or the top's: refused, nothing runs.
        await tab.send_json_to({"type": "assistant.confirm", "run_id": asked["parent_run_id"],
                                "step_id": asked["step"]["id"], "approve": True})
        forged = (await receive_until(tab, lambda e: e["type"] == "assistant.error"))[-1]
        await tab.send_json_to({"type": "assistant.confirm", "run_id": asked["run_id"],
                                "step_id": asked["step"]["id"], "approve": True})
        events = await receive_until(tab, top_ended(), timeout=30)
        await tab.disconnect()
        return asked, forged, events

    asked, forged, events = asyncio.run(scenario())
    top, [keeper, clerk] = the_tree(events[-1]["run_id"])
    assert (keeper.spec, clerk.spec, clerk.parent_id, clerk.depth) == ("test-keeper", "test-clerk", keeper.pk, 2)
    assert (asked["run_id"], asked["member"], asked["parent_run_id"]) == (clerk.pk, "test-clerk", keeper.pk)
    assert asked["step"]["tool_name"] == "tracker_task_delete" and asked["step"]["arguments"] == {"pk": chore.pk}
    assert forged["code"] == "stale_confirmation", forged
    assert (top.status, keeper.status, clerk.status) == ("succeeded", "succeeded", "succeeded"), top.error
    assert top.reply == "The old chore is gone."
    assert not Task.objects.filter(pk=chore.pk).exists() and Task.objects.filter(pk=keep.pk).exists()
    [deleted] = tool_steps(clerk)
    assert (deleted.confirmation, deleted.took_effect) == ("approved", True)
    for asking in (*tool_steps(keeper), *tool_steps(top)):
        assert (asking.result["status"], asking.took_effect) == ("answered", True), asking.result
