"""Feedback on answers, and answers as Markdown, through the real socket, worker and database: thumbs up or
down (with a comment) on a finished run is stored as its quality score, reaches every tab, survives a
reload, and is shown to staff; bad feedback is refused whole."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assistant.live.payloads import message_payload
from assistant.live.selectors import chat_messages
from assistant.models import AgentChat, AgentMessage, AgentRun
from assistant.testing.sockets import connect, receive_until, settle, unnumbered
from tests.conftest import WorkerProcess, assistant_settings_with

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "You have **2 open tasks**:\n\n- Buy milk\n- Call `mum`\n\n<img src=x onerror=alert(1)>"


def tag_names(html: str) -> list[str]:
    found: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append(tag)

    Tags().feed(html)
    return found


def of_type(*types: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event["type"] in types


async def opened(tab: WebsocketCommunicator) -> WebsocketCommunicator:
    assert (await tab.connect())[0]
    return tab


def finished_run(user: Any, *, reply: str = "Done.", status: str = AgentRun.Status.SUCCEEDED) -> AgentRun:
    """A run that ended (as the worker leaves one) with its reply in a chat of its own."""
    chat = AgentChat.objects.create(owner=user, title="earlier")
    # Filed in its profile, as the worker files a run it ends: otherwise a running worker's sweeper files it
    # during the test, racing the test database's emptying at its end (a deadlock).
    run = AgentRun.objects.create(owner=user, chat=chat, status=status, reply=reply,
                                  profile_recorded_at=timezone.now())
    AgentMessage.objects.create(chat=chat, owner=user, role="user", content="question", run=run)
    AgentMessage.objects.create(chat=chat, owner=user, role="assistant", content=reply, run=run)
    return run


@pytest.mark.worker
def test_thumbs_up_with_a_comment_reaches_every_tab_and_survives_a_reload(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"text": REPLY})

    first_tab, second_tab = connect(alice), connect(alice)

    async def scenario() -> None:
        first, second = await opened(first_tab), await opened(second_tab)
        await first.send_json_to({"type": "assistant.send", "content": "what is open?"})
        replied = (await receive_until(first, of_type("assistant.replied", "assistant.reply_failed")))[-1]
        await receive_until(second, of_type("assistant.replied", "assistant.reply_failed"))
        assert replied["type"] == "assistant.replied", replied
        # The reply's Markdown arrives as safe HTML beside the text; no feedback yet.
        message = replied["message"]
        assert message["content"] == REPLY
        assert tag_names(message["html"]) == ["p", "strong", "ul", "li", "li", "code", "p"]
        assert "&lt;img src=x onerror=alert(1)&gt;" in message["html"]
        assert message["feedback"] is None

        await first.send_json_to({"type": "assistant.feedback", "run_id": replied["run_id"], "score": 1,
                                  "comment": "  Spot on.  "})
        for tab in (first, second):
            saved = (await receive_until(tab, of_type("assistant.feedback_saved", "assistant.error")))[-1]
            assert unnumbered(saved) == {
                "type": "assistant.feedback_saved", "run_id": replied["run_id"], "chat_id": replied["chat_id"],
                "message_id": message["id"], "feedback": {"score": 1, "comment": "Spot on."},
            }
        run = await database_sync_to_async(AgentRun.objects.get)(pk=replied["run_id"])
        assert (run.quality_score, run.feedback_comment) == (1.0, "Spot on.")
        assert run.feedback_at is not None

        # A reload shows it on the reply (and only there), with the reply's HTML.
        await second.send_json_to({"type": "assistant.load", "chat_id": replied["chat_id"]})
        loaded = (await receive_until(second, of_type("assistant.messages_loaded")))[-1]
        question, answer = loaded["messages"]
        assert (question["role"], question["html"], question["feedback"]) == ("user", None, None)
        assert answer["feedback"] == {"score": 1, "comment": "Spot on."}
        assert answer["html"] == message["html"]

        # Changing one's mind: thumbs down without a comment, then taking it back.
        await second.send_json_to({"type": "assistant.feedback", "run_id": replied["run_id"], "score": -1})
        saved = (await receive_until(first, of_type("assistant.feedback_saved")))[-1]
        assert saved["feedback"] == {"score": -1, "comment": ""}
        run = await database_sync_to_async(AgentRun.objects.get)(pk=replied["run_id"])
        assert (run.quality_score, run.feedback_comment) == (0.0, "")
        await second.send_json_to({"type": "assistant.feedback", "run_id": replied["run_id"], "score": 0})
        saved = (await receive_until(first, of_type("assistant.feedback_saved")))[-1]
        assert saved["feedback"] is None
        await first.send_json_to({"type": "assistant.load", "chat_id": replied["chat_id"]})
        loaded = (await receive_until(first, of_type("assistant.messages_loaded")))[-1]
        assert loaded["messages"][1]["feedback"] is None
        run = await database_sync_to_async(AgentRun.objects.get)(pk=replied["run_id"])
        assert (run.quality_score, run.feedback_at) == (None, None)
        await first.disconnect()
        await second.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())


BAD_FEEDBACK = [
    ({"score": 2}, "bad_request"),
    ({"score": "1"}, "bad_request"),
    ({"score": True}, "bad_request"),
    ({"score": 1.0}, "bad_request"),
    ({}, "bad_request"),
    ({"score": 1, "comment": "x" * 2001}, "bad_request"),
    ({"score": 1, "comment": ["not", "text"]}, "bad_request"),
    ({"score": 1, "comment": "nul \u0000 inside"}, "bad_request"),
    ({"score": 0, "comment": "a comment without a thumb"}, "bad_request"),
    ({"run_id": None, "score": 1}, "bad_request"),
    ({"run_id": "abc", "score": 1}, "bad_request"),
    ({"run_id": 2**62, "score": 1}, "not_found"),
]


def test_bad_feedback_is_refused_and_what_was_stored_stays(alice: Any) -> None:
    run = finished_run(alice)
    AgentRun.objects.filter(pk=run.pk).update(quality_score=1.0, feedback_comment="Kept.")
    alice_tab = connect(alice)

    async def scenario() -> None:
        tab = await opened(alice_tab)
        for number, (fields, code) in enumerate(BAD_FEEDBACK):
            await tab.send_json_to({"type": "assistant.feedback", "run_id": run.pk, **fields, "request_id": number})
            answer = await tab.receive_json_from(timeout=5)
            assert (answer["type"], answer["code"], answer["request_id"]) == ("assistant.error", code, number), (
                fields, answer)
        assert await settle((tab, alice)) == [[]]  # no feedback_saved for any of them
        await tab.disconnect()

    asyncio.run(scenario())
    run.refresh_from_db()
    assert (run.quality_score, run.feedback_comment) == (1.0, "Kept.")


def test_a_comment_of_2000_characters_is_kept_whole(alice: Any) -> None:
    run = finished_run(alice)

    alice_tab = connect(alice)

    async def scenario() -> None:
        tab = await opened(alice_tab)
        await tab.send_json_to({"type": "assistant.feedback", "run_id": run.pk, "score": -1, "comment": "y" * 2000})
        saved = (await receive_until(tab, of_type("assistant.feedback_saved", "assistant.error")))[-1]
        assert saved["type"] == "assistant.feedback_saved", saved
        await tab.disconnect()

    asyncio.run(scenario())
    run.refresh_from_db()
    assert (run.quality_score, run.feedback_comment) == (0.0, "y" * 2000)


def test_feedback_on_another_persons_run_is_not_found_and_changes_nothing(alice: Any, bob: Any) -> None:
    run = finished_run(alice)

    her_tab, his_tab = connect(alice), connect(bob)

    async def scenario() -> None:
        hers, his = await opened(her_tab), await opened(his_tab)
        await his.send_json_to({"type": "assistant.feedback", "run_id": run.pk, "score": -1, "comment": "bad"})
        answer = await his.receive_json_from(timeout=5)
        assert (answer["type"], answer["code"]) == ("assistant.error", "not_found")
        assert await settle((his, bob), (hers, alice)) == [[], []]  # neither was told of a change
        await hers.disconnect()
        await his.disconnect()

    asyncio.run(scenario())
    run.refresh_from_db()
    assert (run.quality_score, run.feedback_comment, run.feedback_at) == (None, "", None)


def test_feedback_is_for_runs_that_ended_whether_they_answered_or_not(alice: Any) -> None:
    working = [finished_run(alice, status=status) for status in AgentRun.ACTIVE_STATUSES]
    ended = [finished_run(alice, status=status) for status in (
        AgentRun.Status.FAILED, AgentRun.Status.CANCELLED, AgentRun.Status.TIMED_OUT)]
    alice_tab = connect(alice)

    async def scenario() -> None:
        tab = await opened(alice_tab)
        for run in working:
            await tab.send_json_to({"type": "assistant.feedback", "run_id": run.pk, "score": 1})
            answer = await tab.receive_json_from(timeout=5)
            assert (answer["type"], answer["code"]) == ("assistant.error", "bad_request"), (run.status, answer)
        for run in ended:
            await tab.send_json_to({"type": "assistant.feedback", "run_id": run.pk, "score": -1, "comment": "Slow"})
            saved = await tab.receive_json_from(timeout=5)
            assert (saved["type"], saved["run_id"]) == ("assistant.feedback_saved", run.pk), (run.status, saved)
        await tab.disconnect()

    asyncio.run(scenario())
    assert [AgentRun.objects.get(pk=run.pk).quality_score for run in working] == [None] * len(working)
    assert [AgentRun.objects.get(pk=run.pk).feedback_comment for run in ended] == ["Slow", "Slow", "Slow"]


def test_a_chats_messages_and_their_feedback_load_in_one_query(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice)
    for number in range(5):
        run = AgentRun.objects.create(owner=alice, chat=chat, status="succeeded", quality_score=number % 2)
        AgentMessage.objects.create(chat=chat, owner=alice, role="user", content=f"q{number}", run=run)
        AgentMessage.objects.create(chat=chat, owner=alice, role="assistant", content=f"*a{number}*", run=run)
    with CaptureQueriesContext(connection) as queries:
        payloads = [message_payload(message) for message in chat_messages(chat=chat)]
    assert len(queries) == 1, [query["sql"] for query in queries]
    assert [p["feedback"]["score"] for p in payloads if p["role"] == "assistant"] == [-1, 1, -1, 1, -1]
    assert payloads[1]["html"] == "<p><em>a0</em></p>\n"


def test_staff_see_the_feedback_on_runs_and_filter_by_it(alice: Any, user_factory: Callable[..., Any]) -> None:
    liked, disliked, silent = finished_run(alice), finished_run(alice), finished_run(alice)
    AgentRun.objects.filter(pk=liked.pk).update(quality_score=1.0, feedback_comment="Exactly what I needed")
    AgentRun.objects.filter(pk=disliked.pk).update(quality_score=0.0, feedback_comment="Deleted the wrong one")
    staff = Client()
    staff.force_login(user_factory(is_staff=True, is_superuser=True))

    def listed(query: str) -> set[int]:
        response = staff.get(f"/admin/assistant/agentrun/{query}")
        assert response.status_code == 200
        return {run.pk for run in response.context["cl"].result_list}

    everything = staff.get("/admin/assistant/agentrun/").content.decode()
    assert "Exactly what I needed" in everything and "Deleted the wrong one" in everything
    assert listed("?feedback=up") == {liked.pk}
    assert listed("?feedback=down") == {disliked.pk}
    assert listed("?feedback=none") == {silent.pk}
    page = staff.get(f"/admin/assistant/agentrun/{disliked.pk}/change/").content.decode()
    assert "Deleted the wrong one" in page and "Quality score" in page
