"""The summary of a long chat reads as a transcript: each line labelled once by who said it ("User: …",
"Assistant: …"), in the stored summary and in the summarising step staff and the person see."""

from __future__ import annotations

import re
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentMessage, AgentStep
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _long_chat(owner: Any, messages: int) -> AgentChat:
    chat = AgentChat.objects.create(owner=owner, title="long")
    said = None  # each message follows the one before: one branch
    for number in range(1, messages + 1):
        role = "user" if number % 2 else "assistant"
        said = AgentMessage.objects.create(chat=chat, owner=owner, role=role, parent=said,
                                           content=f"message {number}\nand its second line")
    return chat


def _ask(user: Any, text: str, chat: AgentChat) -> Any:
    with assistant_settings_with(MODEL="offline"):
        run = chat_send(user=user, content=text, chat_id=chat.pk).run
    return wait_for_run(run.pk, "succeeded", "failed", "cancelled", "timed_out")


def _lines(summary: str) -> list[str]:
    heading, *lines = summary.splitlines()
    assert heading == "Summary of the earlier conversation:", summary
    return lines


def test_the_offline_summary_labels_each_line_once_by_who_said_it(alice: Any, celery_worker: WorkerProcess) -> None:
    chat = _long_chat(alice, 59)
    run = _ask(alice, "message 60", chat)
    assert run.status == "succeeded", run.error

    summary = AgentMessage.objects.get(chat=chat, role="summary").content
    step = run.steps.get(kind=AgentStep.Kind.MODEL_CALL, arguments__purpose="summarise")
    assert step.result["text"] == summary
    # The last 12 of the 40 messages that left the window, each with its second line, labelled once.
    assert _lines(summary) == [f"{'User' if n % 2 else 'Assistant'}: message {n} and its second line"
                               for n in range(29, 41)]
    assert not re.search(r"(?i)\b(user|assistant): (user|assistant):", summary), summary

    # Extended on the next turn: the earlier summary's lines keep their labels, no heading or label doubled.
    run = _ask(alice, "message 62", chat)
    assert run.status == "succeeded", run.error
    extended = AgentMessage.objects.filter(chat=chat, role="summary").latest("id").content
    assert _lines(extended) == [f"{'User' if n % 2 else 'Assistant'}: message {n} and its second line"
                                for n in range(31, 43)]
