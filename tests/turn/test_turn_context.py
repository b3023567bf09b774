"""What the model is sent: compacted history with a reused summary, recalled memories, the profile line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.live.selectors import chat_messages
from assistant.models import AgentChat, AgentMessage, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_completion, openai_stream
from assistant.testing.providers.server import error_reply
from assistant.turn.context import NOTES_START
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

MODEL = "openai:fake-gpt"


def long_chat(owner: Any, messages: int) -> AgentChat:
    chat = AgentChat.objects.create(owner=owner, title="long")
    said = None  # each message follows the one before: one branch
    for number in range(1, messages + 1):
        role = "user" if number % 2 else "assistant"
        said = AgentMessage.objects.create(chat=chat, owner=owner, role=role, content=f"message {number}", parent=said)
    return chat


def ask(user: Any, text: str, chat: AgentChat | None = None, **settings: Any) -> Any:
    with assistant_settings_with(MODEL=MODEL, **settings):
        run = chat_send(user=user, content=text, chat_id=chat.pk if chat else None).run
    return wait_for_run(run.pk, "succeeded", "failed", "cancelled", "timed_out")


def sent_texts(body: dict[str, Any]) -> list[str]:
    """The conversation as sent: the system prompt first, earlier notes (if any) left out."""
    return [message["content"] for message in body["messages"] if not message["content"].startswith(NOTES_START)]


def notes(body: dict[str, Any]) -> dict[str, Any]:
    """The earlier notes the model was sent as data (see assistant.turn.context), or {} without any."""
    found = [message["content"] for message in body["messages"] if message["content"].startswith(NOTES_START)]
    return json.loads(found[0].split("\n")[-2]) if found else {}


def test_a_long_chat_is_summarised_once_and_the_summary_is_extended_not_redone(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = long_chat(alice, 59)
    fake_openai.queue(openai_completion("SUMMARY ONE"), openai_stream(["answer one"]))
    run = ask(alice, "message 60", chat)
    assert (run.status, run.reply) == ("succeeded", "answer one")

    summarise, answer = fake_openai.bodies
    assert "message 1\n" in summarise["messages"][1]["content"] + "\n"
    assert "message 40" in summarise["messages"][1]["content"]
    assert "message 41" not in summarise["messages"][1]["content"]
    assert notes(answer)["summary"] == "SUMMARY ONE"  # as data, not in the system prompt
    assert "SUMMARY ONE" not in answer["messages"][0]["content"]
    assert sent_texts(answer)[1:] == [f"message {n}" for n in range(41, 61)]  # the last 20, verbatim
    summary = AgentMessage.objects.get(chat=chat, role="summary")
    assert summary.content == "SUMMARY ONE"
    assert summary.covers_through == AgentMessage.objects.get(chat=chat, content="message 40").pk
    assert run.steps.filter(kind="model_call", arguments__purpose="summarise").count() == 1

    # The next turn folds only the two messages that left the window into the stored summary.
    fake_openai.reset()
    fake_openai.queue(openai_completion("SUMMARY TWO"), openai_stream(["answer two"]))
    run = ask(alice, "message 62", chat)
    summarise, answer = fake_openai.bodies
    folded = summarise["messages"][1]["content"]
    assert "Earlier summary: SUMMARY ONE" in folded
    assert "message 41" in folded and "message 42" in folded
    assert "message 40" not in folded and "message 43" not in folded
    assert sent_texts(answer)[1:] == [f"message {n}" for n in range(43, 61)] + ["answer one", "message 62"]
    assert notes(answer)["summary"] == "SUMMARY TWO"
    assert AgentMessage.objects.filter(chat=chat, role="summary").count() == 2
    # What the person sees never includes the assistant's own summaries.
    assert [m.role for m in chat_messages(chat=chat)].count("summary") == 0


def test_a_failing_summariser_leaves_older_turns_out_with_a_notice_and_still_answers(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    chat = long_chat(alice, 59)
    fake_openai.queue(error_reply(400, "summaries are broken today"), openai_stream(["still here"]))
    run = ask(alice, "message 60", chat)
    assert (run.status, run.reply) == ("succeeded", "still here")
    notice = run.steps.get(kind=AgentStep.Kind.NOTICE)
    assert "summarising them failed" in notice.reason
    answer = fake_openai.bodies[-1]
    assert sent_texts(answer)[1:] == [f"message {n}" for n in range(41, 61)]
    assert not AgentMessage.objects.filter(chat=chat, role="summary").exists()


def test_memories_are_recalled_for_their_owner_only(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["Noted: green."]))
    ask(alice, "My favourite colour is green.")
    wait_for(lambda: alice.agent_memories.exists(), what="alice's memory")

    fake_openai.queue(openai_stream(["I don't know."]), openai_stream(["Green."]))
    ask(bob, "What is my favourite colour?")
    ask(alice, "What is my favourite colour?", chat=AgentChat.objects.create(owner=alice))
    bobs_request, alices_request = fake_openai.bodies[-2:]
    assert notes(bobs_request) == {} and "green" not in json.dumps(bobs_request["messages"]).lower()
    assert notes(alices_request) == {
        "memories": ["User asked: My favourite colour is green.\nAssistant answered: Noted: green."]
    }


def test_a_failing_embedder_means_no_memory_but_still_an_answer(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["Answered without memory."]))
    # The fake provider has no embeddings endpoint: every embedding call fails.
    run = ask(alice, "hello", EMBEDDER="openai:text-embedding-3-small")
    assert (run.status, run.reply) == ("succeeded", "Answered without memory.")
    assert "Memory is unavailable" in run.steps.get(kind="notice").reason
    assert not alice.agent_memories.exists()


def test_the_profile_line_reaches_the_system_prompt_after_the_first_run(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream(["one"]), openai_stream(["two"]))
    ask(alice, "first")
    ask(alice, "second")
    first, second = (body["messages"][0]["content"] for body in fake_openai.bodies)
    assert "prior invocations" not in first
    assert 'Agent "default" — 1 prior invocations, 100% success rate' in second
