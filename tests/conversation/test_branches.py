"""Changing your mind, through the real socket, worker and database: editing a sent message (the first, or one in the
middle) starts a branch beside it, answered from what came before it only; answering a question again keeps the
earlier answers as branches; the person pages between branches, and a reload reads the branch they chose. What a
branch did is said beside the switcher and is never undone. Another person's message, an answer, or a chat at work
are refused, with nothing stored."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with
from tests.testapp.models import Effect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


async def _answered(socket: Any, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Send `frame` and every event up to its run's answer."""
    await socket.send_json_to(frame)
    return await receive_until(socket, lambda event: event["type"] in {"assistant.replied", "assistant.error"},
                               timeout=30)


async def _load(socket: Any, frame: dict[str, Any]) -> dict[str, Any]:
    await socket.send_json_to({"steps": True, "request_id": "load", **frame})
    return (await receive_until(socket, lambda event: event["type"] in {"assistant.messages_loaded",
                                                                       "assistant.error"}, timeout=10))[-1]


def _said(state: dict[str, Any]) -> list[str]:
    return [message["content"] for message in state["messages"]]


def _asked_model(fake_openai: FakeOpenAIServer) -> list[str]:
    """What the newest model call was given of the conversation: its user and assistant messages, in order."""
    return [message["content"] for message in fake_openai.bodies[-1]["messages"]
            if message["role"] in {"user", "assistant"} and isinstance(message.get("content"), str)
            and not message["content"].startswith("<")]


def test_editing_the_first_and_a_middle_message_starts_branches_that_keep_the_old_ones_and_what_they_did(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(
        openai_stream([], [("c1", "test_flash", {"label": "milk"})]), openai_stream(["Recorded milk."]),
        openai_stream(["Answer two."]),
        openai_stream(["Answer three."]),
        openai_stream(["Answer two, edited."]),
        openai_stream(["Recorded nothing this time."]),
    )
    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        first = (await _answered(tab, {"type": "assistant.send", "content": "record milk"}))[0]
        chat = first["chat_id"]
        await _answered(tab, {"type": "assistant.send", "chat_id": chat, "content": "question two"})
        await _answered(tab, {"type": "assistant.send", "chat_id": chat, "content": "question three"})
        seen: dict[str, Any] = {"linear": await _load(tab, {"type": "assistant.load", "chat_id": chat})}
        second = seen["linear"]["messages"][2]

        # A message in the middle: the branch follows the first answer; the model hears nothing of what came after.
        edited = await _answered(tab, {"type": "assistant.send", "chat_id": chat, "edit_of": second["id"],
                                       "content": "question two, edited"})
        seen["middle sent"] = edited[0]
        seen["middle asked"] = await database_sync_to_async(_asked_model)(fake_openai)
        seen["middle"] = await _load(tab, {"type": "assistant.load", "chat_id": chat})

        # The first message: a branch from the start, beside the one that recorded milk.
        edited = await _answered(tab, {"type": "assistant.send", "chat_id": chat,
                                       "edit_of": first["message"]["id"], "content": "record nothing"})
        seen["first sent"] = edited[0]
        seen["first asked"] = await database_sync_to_async(_asked_model)(fake_openai)
        seen["first"] = await _load(tab, {"type": "assistant.load", "chat_id": chat})

        # Back to the first version of the first message: the branch as it was left, to its end.
        await tab.send_json_to({"type": "assistant.branch", "message_id": first["message"]["id"], "request_id": "b"})
        seen["turned"] = (await receive_until(tab, lambda event: event.get("request_id") == "b", timeout=10))[-1]
        await tab.send_json_to({"type": "assistant.chats", "request_id": "list"})
        seen["listed"] = (await receive_until(tab, lambda event: event.get("request_id") == "list", timeout=10))[-1]
        await tab.disconnect()
        # A new tab (a reload) reads the branch the person chose.
        again = await database_sync_to_async(connect)(alice)
        assert (await again.connect())[0]
        seen["reloaded"] = await _load(again, {"type": "assistant.load"})
        await again.disconnect()
        return seen

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        seen = asyncio.run(scenario())

    assert _said(seen["linear"]) == ["record milk", "Recorded milk.", "question two", "Answer two.",
                                     "question three", "Answer three."]
    assert [m["branch"] for m in seen["linear"]["messages"]] == [None] * 6

    first_id, first_answer, second_id = (m["id"] for m in seen["linear"]["messages"][:3])
    sent = seen["middle sent"]
    assert sent["type"] == "assistant.sent" and sent["message"]["parent_id"] == first_answer
    assert sent["message"]["branch"] == {"position": 2, "count": 2, "ids": [second_id, sent["message"]["id"]],
                                         "did": {}}
    assert seen["middle asked"] == ["record milk", "Recorded milk.", "question two, edited"]
    assert _said(seen["middle"]) == ["record milk", "Recorded milk.", "question two, edited", "Answer two, edited."]
    assert seen["middle"]["messages"][2]["branch"]["position"] == 2

    sent = seen["first sent"]
    assert sent["message"]["parent_id"] is None
    # The branch left behind recorded milk, and still has: said beside the switcher, in the view's own words.
    assert sent["message"]["branch"] == {"position": 2, "count": 2, "ids": [first_id, sent["message"]["id"]],
                                         "did": {str(first_id): ["Recorded milk."]}}
    assert seen["first asked"] == ["record nothing"]
    assert _said(seen["first"]) == ["record nothing", "Recorded nothing this time."]
    assert list(Effect.objects.filter(owner=alice).values_list("label", flat=True)) == ["milk"]

    # Turned back: the first branch to where it was left (its edited middle message), the other one's place said.
    turned = seen["turned"]
    assert turned["type"] == "assistant.messages_loaded"
    assert _said(turned) == ["record milk", "Recorded milk.", "question two, edited", "Answer two, edited."]
    assert turned["messages"][0]["branch"] == {"position": 1, "count": 2, "ids": [first_id, sent["message"]["id"]],
                                               "did": {}}
    assert turned["messages"][2]["branch"]["position"] == 2
    # Each answer's run comes with its steps, right after its question: the first run's tool call among them.
    by_question = {run["question_id"]: run for run in turned["runs"] if run["parent_run_id"] is None}
    assert [s["tool_name"] for s in by_question[first_id]["steps"] if s["kind"] == "tool_call"] == ["test_flash"]
    assert _said(seen["reloaded"]) == _said(turned)
    # The list of chats previews the branch read, not the newest message of another.
    assert [chat["preview"] for chat in seen["listed"]["chats"]] == ["Answer two, edited."]
    assert AgentChat.objects.get(owner=alice).leaf_id == turned["messages"][-1]["id"]


def test_answering_again_twice_keeps_every_answer_as_a_branch_and_each_run_is_counted_once(
    alice: Any, user_factory: Callable[..., Any], celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["First answer."]), openai_stream(["Second answer."]),
                      openai_stream(["Third answer."]), openai_stream(["After the second."]))
    tab = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await tab.connect())[0]
        asked = (await _answered(tab, {"type": "assistant.send", "content": "tell me something"}))
        question, chat = asked[0]["message"], asked[0]["chat_id"]
        seen: dict[str, Any] = {"again": []}
        for _ in range(2):
            events = await _answered(tab, {"type": "assistant.regenerate", "message_id": question["id"]})
            seen["again"].append(events)
            seen.setdefault("asked", []).append(await database_sync_to_async(_asked_model)(fake_openai))
        answers = [events[-1]["message"]["id"] for events in seen["again"]]
        # Back to the second answer, and the conversation goes on from it.
        await tab.send_json_to({"type": "assistant.branch", "message_id": answers[0], "request_id": "b"})
        await receive_until(tab, lambda event: event.get("request_id") == "b", timeout=10)
        await _answered(tab, {"type": "assistant.send", "chat_id": chat, "content": "and then?"})
        seen["continued asked"] = await database_sync_to_async(_asked_model)(fake_openai)
        seen["loaded"] = await _load(tab, {"type": "assistant.load", "chat_id": chat})
        # Paging to the third answer shows it alone, without what followed the second.
        third = seen["loaded"]["messages"][1]["branch"]["ids"][2]
        await tab.send_json_to({"type": "assistant.branch", "message_id": third, "request_id": "c"})
        seen["third"] = (await receive_until(tab, lambda event: event.get("request_id") == "c", timeout=10))[-1]
        seen["third id"] = third
        await tab.disconnect()
        return seen

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        seen = asyncio.run(scenario())
    third = seen["third id"]

    sent, *_, replied = seen["again"][1]
    assert sent["type"] == "assistant.sent" and sent["answers_again"] is True
    assert sent["message"]["content"] == "tell me something"  # the question itself: no new message of the person's
    assert replied["message"]["content"] == "Third answer."
    assert replied["message"]["branch"]["position"] == 3 and replied["message"]["branch"]["count"] == 3
    # Each answer again is made from the question alone: the earlier answers are other branches.
    assert seen["asked"] == [["tell me something"], ["tell me something"]]
    assert seen["continued asked"] == ["tell me something", "Second answer.", "and then?"]
    assert _said(seen["loaded"]) == ["tell me something", "Second answer.", "and then?", "After the second."]
    assert seen["loaded"]["messages"][1]["branch"]["position"] == 2
    assert _said(seen["third"]) == ["tell me something", "Third answer."]
    shown_runs = [run["id"] for run in seen["third"]["runs"]]
    assert shown_runs == [seen["third"]["messages"][1]["run_id"]]  # only the run whose answer is shown

    assert AgentMessage.objects.filter(owner=alice, role="user").count() == 2
    runs = AgentRun.objects.filter(owner=alice, parent__isnull=True)
    assert runs.count() == 4 and set(runs.values_list("status", flat=True)) == {"succeeded"}
    # The registry files each run once: four turns, four entries.
    assert AgentProfile.objects.get(owner=alice, spec_name="default").invocations == 4

    # Staff see where the third answer stands among its branches, with the runs of the others linked.
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    third_run, first_run, second_run = (AgentMessage.objects.get(pk=answer).run_id for answer in (
        third, *seen["loaded"]["messages"][1]["branch"]["ids"][:2]))
    page = staff.get(reverse("admin:assistant_agentrun_change", args=[third_run]))
    text = " ".join(unescape(page.content.decode()).split())
    assert "Its answer is 3 of 3: the person asked for the question to be answered again" in text
    for other in (first_run, second_run):
        assert reverse("admin:assistant_agentrun_change", args=[other]) in text
    assert "What the other branches did stays done" in text


def test_another_persons_message_an_answer_and_a_chat_at_work_are_refused_and_nothing_is_stored(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["An answer."]),
                      openai_stream([], [("c1", "test_slow_effect", {"label": "slow", "seconds": 3})]),
                      openai_stream(["Done slowly."]))
    tab, strangers_tab = connect(alice), connect(bob)

    async def refused(socket: Any, frame: dict[str, Any]) -> dict[str, Any]:
        await socket.send_json_to({"request_id": "r", **frame})
        return (await receive_until(socket, lambda event: event["type"] == "assistant.error", timeout=10))[-1]

    async def scenario() -> dict[str, str]:
        assert (await tab.connect())[0] and (await strangers_tab.connect())[0]
        events = await _answered(tab, {"type": "assistant.send", "content": "first"})
        question, answer, chat = events[0]["message"]["id"], events[-1]["message"]["id"], events[0]["chat_id"]
        codes = {
            "another person's message, edited": await refused(strangers_tab, {
                "type": "assistant.send", "content": "mine now", "edit_of": question}),
            "another person's message, answered again": await refused(strangers_tab, {
                "type": "assistant.regenerate", "message_id": question}),
            "another person's branch": await refused(strangers_tab, {"type": "assistant.branch",
                                                                     "message_id": question}),
            "an answer, edited": await refused(tab, {"type": "assistant.send", "content": "x", "edit_of": answer}),
            "an answer, answered again": await refused(tab, {"type": "assistant.regenerate", "message_id": answer}),
            "an edit into another chat": await refused(tab, {"type": "assistant.send", "content": "x",
                                                             "edit_of": question, "chat_id": chat + 1000}),
            "an edit as a new chat": await refused(tab, {"type": "assistant.send", "content": "x",
                                                         "edit_of": question, "new_chat": True}),
            "no message to answer again": await refused(tab, {"type": "assistant.regenerate"}),
        }
        # While a run works in the chat, neither an edit, an answer again, nor another branch.
        await tab.send_json_to({"type": "assistant.send", "chat_id": chat, "content": "do it slowly"})
        await receive_until(tab, lambda event: event["type"] == "assistant.step"
                            and event["step"]["tool_name"] == "test_slow_effect", timeout=30)
        codes["an edit while at work"] = await refused(tab, {"type": "assistant.send", "content": "x",
                                                             "edit_of": question})
        codes["an answer again while at work"] = await refused(tab, {"type": "assistant.regenerate",
                                                                     "message_id": question})
        codes["another branch while at work"] = await refused(tab, {"type": "assistant.branch",
                                                                    "message_id": answer})
        await receive_until(tab, lambda event: event["type"] == "assistant.replied", timeout=30)
        await tab.disconnect()
        await strangers_tab.disconnect()
        return {what: error["code"] for what, error in codes.items()}

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        codes = asyncio.run(scenario())

    assert codes == {
        "another person's message, edited": "not_found", "another person's message, answered again": "not_found",
        "another person's branch": "not_found", "an answer, edited": "not_found",
        "an answer, answered again": "not_found", "an edit into another chat": "bad_request",
        "an edit as a new chat": "bad_request", "no message to answer again": "bad_request",
        "an edit while at work": "run_active", "an answer again while at work": "run_active",
        "another branch while at work": "run_active",
    }
    assert AgentMessage.objects.filter(role="user").count() == 2  # alice's two; nothing of the refusals
    assert not AgentMessage.objects.filter(owner=bob).exists()
    assert AgentRun.objects.filter(parent__isnull=True).count() == 2
    assert AgentChat.objects.get(owner=alice).leaf_id is None  # never branched
