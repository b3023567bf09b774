"""The question a task message carries lets the worker embed it before reading the run; the stored
message stays the truth. The loop runs in-process, so the test controls what the message carried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.runs.lease import lease_claim, new_holder
from assistant.turn.context import chat_history
from assistant.turn.loop import run_turn
from tests.conftest import assistant_settings_with

pytestmark = pytest.mark.django_db


def _turn(run: AgentRun, asked: dict[str, Any] | None) -> AgentRun:
    status = run_turn(run.pk, holder=new_holder(), claim=lease_claim, asked=asked)
    run.refresh_from_db()
    assert status == run.status == "succeeded", (status, run.status, run.error)
    return run


@pytest.mark.parametrize(
    "asked",
    [
        None,
        {"question": "What is my favourite colour?", "embedder": "local"},
        {"question": "a different, stale question", "embedder": "local"},
        {"question": "What is my favourite colour?", "embedder": "no-such-embedder"},
        {"question": 42},
    ],
    ids=["none", "matching", "other-text", "other-embedder", "malformed"],
)
def test_what_is_remembered_is_the_stored_question_whatever_the_message_carried(
    alice: Any, script: Callable[..., str], asked: dict[str, Any] | None
) -> None:
    with assistant_settings_with(MODEL=script({"text": "Green, you said."}), EMBEDDER="local"):
        run = chat_send(user=alice, content="What is my favourite colour?").run
    _turn(run, asked)
    memory = alice.agent_memories.get()
    assert memory.content == "User asked: What is my favourite colour?\nAssistant answered: Green, you said."
    assert (memory.dims, memory.embedder) == (384, "local:all-MiniLM-L6-v2")
    assert not run.steps.filter(kind="notice").exists()  # recall worked: no "memory unavailable" notice


def test_the_history_is_what_came_before_the_question_and_never_what_came_after(alice: Any) -> None:
    """A run taken up late (say, redelivered after the person wrote again) answers its own question with
    what was said before it; messages of a deleted run still count, and summaries are kept apart."""
    with assistant_settings_with(MODEL="offline"):
        earlier = chat_send(user=alice, content="earlier question").run
    chat = AgentChat.objects.get(pk=earlier.chat_id)
    # Each message follows the one before it (sends find that end themselves).
    answered = AgentMessage.objects.create(chat=chat, owner=alice, role="assistant", content="earlier answer",
                                           run=earlier, parent=AgentMessage.objects.get(run=earlier, role="user"))
    AgentMessage.objects.create(chat=chat, owner=alice, role="summary", content="a summary", run=earlier)
    AgentRun.objects.filter(pk=earlier.pk).update(status="succeeded")
    deleted = AgentRun.objects.create(owner=alice, chat=chat, spec=chat.spec, config=earlier.config, status="failed")
    AgentMessage.objects.create(chat=chat, owner=alice, role="user", content="asked in a deleted run", run=deleted,
                                parent=answered)
    with assistant_settings_with(MODEL="offline"):
        run = chat_send(user=alice, content="this question", chat_id=chat.pk).run
    AgentRun.objects.filter(pk=run.pk).update(status="succeeded")
    with assistant_settings_with(MODEL="offline"):
        later = chat_send(user=alice, content="a later question", chat_id=chat.pk).run
    AgentMessage.objects.create(chat=chat, owner=alice, role="assistant", content="a later answer", run=later,
                                parent=AgentMessage.objects.get(run=later, role="user"))
    deleted.delete()

    history = chat_history(run)
    assert [(row.role, row.content) for row in history] == [
        ("user", "earlier question"), ("assistant", "earlier answer"), ("user", "asked in a deleted run"),
        ("user", "this question"),
    ]
    assert history[-1].owner == alice
