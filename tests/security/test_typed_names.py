"""Names a person types are kept as others will read them: a chat's title (renamed, or taken from the first
message), a feedback comment, the tracker's project names and task titles, and every name an approval card
quotes. Controls, invisible characters and bidirectional overrides go (a title cannot show in an order
other than the one it is stored in, nor be nothing but zero-width spaces), whitespace is one space, the text
is NFC; a title with nothing visible left is refused as an empty one is (see assistant/infra/text.py).

Before: "\\u200b" was a title; "\\u202eexe.txt" was stored as sent, and so shown to staff reversed; the
same in a feedback comment, a project's name and on the approval card.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from assistant.infra.text import readable_text
from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.testing.sockets import connect
from assistant.tools import tools_for
from assistant.tools.describe import describe_call
from tracker.models import Project, Task

RLO, PDF, LRI, PDI, ZWSP, ZWJ, BOM = "\u202e", "\u202c", "\u2066", "\u2069", "\u200b", "\u200d", "\ufeff"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man, woman, girl: one emoji, by its joiners

# What a person types, and what others then read.
READABLE = {
    "trimmed": ("  Groceries  ", "Groceries"),
    "a right-to-left override": (f"{RLO}txt.exe{PDF}", "txt.exe"),
    "every bidi control": ("\u202aa\u202bb\u202cc\u202dd\u202ee\u2066f\u2067g\u2068h\u2069i\u200ej\u200fk\u061cl",
                           "abcdefghijkl"),
    "control characters": ("bell\x07 and\x1b[31m escape\x7f and\x9b C1", "bell and[31m escape and C1"),
    "invisible characters inside": (f"Gro{ZWSP}ce{BOM}ries\u00ad\u2060", "Groceries"),
    "tag characters": ("hi\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065", "hi"),
    "spaces of every kind": ("a\u00a0\u2003\u3000b\t\nc\u2028d", "a b c d"),
    "decomposed accents": ("Cafe\u0301 cre\u0300me", "Caf\u00e9 cr\u00e8me"),
    "what NFKC would change": ("x\u00b2 \u00bd \ufb01le \uff21", "x\u00b2 \u00bd \ufb01le \uff21"),
    "an emoji sequence's joiners": (FAMILY, FAMILY),
    "a joiner at an end": (f"{ZWJ}hi{ZWJ}", "hi"),
    "a Persian non-joiner": ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
                             "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
}
# Titles that show nothing: each is refused exactly as an empty one is.
INVISIBLE = {
    "zero-width spaces": ZWSP * 3,
    "a zero-width space between spaces": f"  {ZWSP}  ",
    "bidi controls only": RLO + LRI + PDI + PDF,
    "a byte order mark and a word joiner": BOM + "\u2060",
    "the Hangul filler": "\u3164\u3164",
    "the braille blank": "\u2800",
    "a mark on nothing": "\u0301",
    "joiners only": ZWJ + "\u200c",
    "control characters": "\x07\x1b\x7f",
}


@pytest.mark.parametrize(("typed", "read"), READABLE.values(), ids=READABLE.keys())
def test_a_name_is_kept_as_it_is_read(typed: str, read: str) -> None:
    assert readable_text(typed) == read


@pytest.mark.parametrize("typed", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_a_name_with_nothing_visible_is_empty(typed: str) -> None:
    assert readable_text(typed) == ""


def test_a_comment_keeps_its_lines_and_loses_the_rest() -> None:
    typed = f"  Spot on.{RLO}\r\n\r\n\tBut{ZWSP} the\x07 second   part  \u2028was{LRI} wrong.{PDI}  "
    assert readable_text(typed, multiline=True) == "Spot on.\n\n\tBut the second   part\nwas wrong."


def test_a_cut_name_leaves_no_joiner_or_space_dangling() -> None:
    assert readable_text("a" * 78 + " \U0001f468\u200d\U0001f469", max_chars=80) == "a" * 78 + " \U0001f468"
    assert readable_text("a" * 79 + " b", max_chars=80) == "a" * 79


# --- through the socket ---------------------------------------------------------------------------------


async def _answer(socket: WebsocketCommunicator, event: dict[str, Any] | str) -> dict[str, Any]:
    await socket.send_to(text_data=event if isinstance(event, str) else json.dumps(event))
    return await socket.receive_json_from(timeout=10)


def _on_socket(user: Any, scenario: Any) -> Any:
    socket = connect(user)

    async def go() -> Any:
        assert (await socket.connect())[0]
        try:
            return await scenario(socket)
        finally:
            await socket.disconnect()

    return asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_a_title_of_only_invisible_characters_is_refused_as_an_empty_one_and_changes_nothing(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice, title="Old title")

    async def scenario(socket: WebsocketCommunicator) -> list[dict[str, Any]]:
        rename = {"type": "assistant.chat_rename", "chat_id": chat.pk}
        empty = await _answer(socket, {**rename, "title": "   "})
        answers = [await _answer(socket, {**rename, "title": title}) for title in INVISIBLE.values()]
        return [empty, *answers]

    empty, *answers = _on_socket(alice, scenario)
    assert (empty["type"], empty["code"]) == ("assistant.error", "bad_request")
    assert [(answer["code"], answer["message"]) for answer in answers] == [("bad_request", empty["message"])] * len(
        INVISIBLE)
    assert AgentChat.objects.get(pk=chat.pk).title == "Old title"


@pytest.mark.django_db(transaction=True)
def test_a_renamed_title_is_stored_and_sent_as_it_is_read(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice, title="Old title")
    typed = f"  {RLO}txt.exe{PDF}\x07  Cafe\u0301\u00a0\u00a0x\u00b2{ZWSP}  "

    async def scenario(socket: WebsocketCommunicator) -> dict[str, Any]:
        return await _answer(socket, {"type": "assistant.chat_rename", "chat_id": chat.pk, "title": typed})

    updated = _on_socket(alice, scenario)
    assert updated["type"] == "assistant.chat_updated"
    assert updated["chat"]["title"] == "txt.exe Caf\u00e9 x\u00b2"
    assert AgentChat.objects.get(pk=chat.pk).title == "txt.exe Caf\u00e9 x\u00b2"


@pytest.mark.django_db(transaction=True)
def test_a_new_chats_title_from_its_first_message_is_kept_as_a_typed_one_and_the_message_as_sent(
    alice: Any
) -> None:
    content = f"{RLO}Buy{ZWSP} milk{PDF}\n\nand bread, " + "and more " * 20

    async def scenario(socket: WebsocketCommunicator) -> dict[str, Any]:
        return await _answer(socket, {"type": "assistant.send", "content": content, "new_chat": True})

    sent = _on_socket(alice, scenario)
    assert sent["type"] == "assistant.sent"
    title = ("Buy milk and bread, " + "and more " * 20)[:80].rstrip()
    assert sent["chat"]["title"] == title
    assert AgentChat.objects.get(pk=sent["chat_id"]).title == title
    # The message itself is the person's words to the assistant, kept as sent.
    assert AgentMessage.objects.get(pk=sent["message"]["id"]).content == content.strip()


def finished_run(user: Any) -> AgentRun:
    chat = AgentChat.objects.create(owner=user, title="earlier")
    run = AgentRun.objects.create(owner=user, chat=chat, status=AgentRun.Status.SUCCEEDED, reply="Done.")
    AgentMessage.objects.create(chat=chat, owner=user, role="assistant", content="Done.", run=run)
    return run


@pytest.mark.django_db(transaction=True)
def test_a_feedback_comment_reaches_staff_without_bidi_overrides_or_controls(alice: Any) -> None:
    run = finished_run(alice)
    typed = f"Spot on{RLO} but\x07 slow.{PDF}\r\nSecond{ZWSP} line."

    async def scenario(socket: WebsocketCommunicator) -> dict[str, Any]:
        return await _answer(socket, {"type": "assistant.feedback", "run_id": run.pk, "score": -1, "comment": typed})

    saved = _on_socket(alice, scenario)
    assert saved["type"] == "assistant.feedback_saved"
    assert saved["feedback"] == {"score": -1, "comment": "Spot on but slow.\nSecond line."}
    assert AgentRun.objects.get(pk=run.pk).feedback_comment == "Spot on but slow.\nSecond line."


# NUL and lone surrogates in a title or a comment, over the socket: refused, nothing changed, the socket on.
UNSTORABLE = {
    "NUL in a title": ('{"type": "assistant.chat_rename", "chat_id": CHAT, "title": "a\\u0000b"}', "bad_request"),
    "lone surrogate in a title": ('{"type": "assistant.chat_rename", "chat_id": CHAT, "title": "a\\ud800b"}',
                                  "bad_frame"),
    "NUL in a comment": ('{"type": "assistant.feedback", "run_id": RUN, "score": 1, "comment": "a\\u0000"}',
                         "bad_request"),
    "lone surrogate in a comment": ('{"type": "assistant.feedback", "run_id": RUN, "score": 1, "comment": "\\udc00"}',
                                    "bad_frame"),
    "NUL in a message": ('{"type": "assistant.send", "chat_id": CHAT, "content": "\\u0000"}', "bad_request"),
    "lone surrogate in a message": ('{"type": "assistant.send", "chat_id": CHAT, "content": "hi \\ud83d"}',
                                    "bad_frame"),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("frame", "code"), UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_nul_or_a_lone_surrogate_in_a_title_comment_or_message_is_refused_and_changes_nothing(
    alice: Any, frame: str, code: str
) -> None:
    run = finished_run(alice)
    frame = frame.replace("CHAT", str(run.chat_id)).replace("RUN", str(run.pk))

    async def scenario(socket: WebsocketCommunicator) -> tuple[dict[str, Any], dict[str, Any]]:
        refused = await _answer(socket, frame)
        return refused, await _answer(socket, {"type": "assistant.ping", "id": "still there"})

    refused, pong = _on_socket(alice, scenario)
    assert (refused["type"], refused["code"]) == ("assistant.error", code) and refused["message"]
    assert pong == {"type": "assistant.pong", "id": "still there"}
    run.refresh_from_db()
    assert (run.chat.title, run.quality_score, run.feedback_comment) == ("earlier", None, "")
    assert AgentMessage.objects.filter(chat=run.chat).count() == 1


# --- the tracker's names, and the approval card ---------------------------------------------------------


@pytest.mark.django_db
def test_a_project_or_task_named_with_nothing_visible_gets_the_required_error(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    response = client.post("/tracker/projects/new/", {"name": ZWSP * 2 + RLO, "description": ""})
    assert response.status_code == 200
    assert response.context["form"].errors == {"name": ["This field is required."]}
    project = Project.objects.create(owner=alice, name="Home")
    response = client.post("/tracker/tasks/new/", {"project": project.pk, "title": "\u3164", "priority": 2})
    assert response.context["form"].errors == {"title": ["This field is required."]}
    assert not Task.objects.exists() and Project.objects.count() == 1


@pytest.mark.django_db
def test_a_project_and_task_are_saved_as_they_are_read(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    response = client.post("/tracker/projects/new/",
                           {"name": f"{RLO}emoH{PDF}  Cafe\u0301", "description": f"Line one{ZWSP}\r\nLine\x07 two"})
    assert response.status_code == 302
    project = Project.objects.get()
    assert (project.name, project.description) == ("emoH Caf\u00e9", "Line one\nLine two")
    client.post("/tracker/tasks/new/", {"project": project.pk, "title": f"Buy{ZWSP} {LRI}milk{PDI}", "priority": 2})
    task = Task.objects.get()
    assert task.title == "Buy milk"
    client.post(f"/tracker/tasks/{task.pk}/comments/", {"body": f"{RLO}On it"})
    assert task.comments.get().body == "On it"


@pytest.mark.django_db
def test_the_approval_card_quotes_names_without_what_would_hide_or_reorder_them(alice: Any) -> None:
    # Saved by code other than the tracker's forms (an import, an older row), and sent by a model.
    project = Project.objects.create(owner=alice, name=f"{RLO}emoH{PDF}")
    offered = {tool.name: tool for tool in tools_for(alice)}
    assert describe_call(alice, offered["tracker_project_delete"], {"pk": project.pk}) == "Delete the project “emoH”"
    summary = describe_call(alice, offered["tracker_task_create"],
                            {"project": project.pk, "title": f"Pay{ZWSP} {RLO}0001$"})
    assert summary == "Create a task “Pay 0001$” in the project “emoH”"
