"""A person's chats over the live protocol: the list (newest activity first, paged), rename and delete
seen by every tab, paging of older messages and the steps of past runs (docs/protocol.md, "Chats")."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.utils import timezone

from assistant.conversation.services import chat_delete, chat_send
from assistant.live import selectors
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until, settle, unnumbered
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tracker.models import Project

pytestmark = pytest.mark.django_db(transaction=True)

BASE = timezone.now() - timedelta(days=30)


def make_chat(owner: Any, title: str, *, minutes: float, messages: Sequence[str] = ()) -> AgentChat:
    """A chat last used `minutes` after BASE (its newest activity, and when a message was last sent in it),
    holding `messages` (alternately the person's and replies), one second apart and ending at that moment."""
    chat = AgentChat.objects.create(owner=owner, title=title)
    used = BASE + timedelta(minutes=minutes)
    message = None  # each follows the one before: one branch
    for index, content in enumerate(messages):
        role = AgentMessage.Role.USER if index % 2 == 0 else AgentMessage.Role.ASSISTANT
        message = AgentMessage.objects.create(chat=chat, owner=owner, role=role, content=content, parent=message)
        at = used - timedelta(seconds=len(messages) - 1 - index)
        AgentMessage.objects.filter(pk=message.pk).update(created_at=at)
    AgentChat.objects.filter(pk=chat.pk).update(updated_at=used, last_activity_at=used)
    chat.refresh_from_db()
    return chat


async def ask(socket: WebsocketCommunicator, event: dict[str, Any]) -> dict[str, Any]:
    await socket.send_json_to(event)
    return await socket.receive_json_from(timeout=5)


def run_socket(user: Any, scenario: Callable[[WebsocketCommunicator], Any]) -> None:
    socket = connect(user)

    async def go() -> None:
        assert (await socket.connect())[0]
        try:
            await scenario(socket)
        finally:
            await socket.disconnect()

    asyncio.run(go())


# --- the list ------------------------------------------------------------------------------------


def test_the_list_pages_through_every_chat_newest_activity_first_each_exactly_once(alice: Any, bob: Any) -> None:
    chats = [make_chat(alice, f"chat {i}", minutes=i) for i in range(7)]
    # Two chats used in the same instant: the later one (higher id) comes first, and paging splits them
    # without losing or repeating either.
    twins = [make_chat(alice, f"twin {i}", minutes=3.5) for i in range(2)]
    gone = make_chat(alice, "deleted", minutes=100)
    AgentChat.objects.filter(pk=gone.pk).update(deleted_at=timezone.now())
    make_chat(bob, "bob's", minutes=50)
    expected = [c.pk for c in sorted([*chats, *twins], key=lambda c: (c.last_activity_at, c.pk), reverse=True)]

    pages: list[dict[str, Any]] = []

    async def scenario(socket: WebsocketCommunicator) -> None:
        before = None
        while True:
            event = {"type": "assistant.chats", "limit": 2, "request_id": len(pages)}
            if before is not None:
                event["before"] = before
            page = await ask(socket, event)
            assert page["type"] == "assistant.chats_listed" and page["request_id"] == len(pages)
            pages.append(page)
            if not page["has_more"]:
                return
            before = page["chats"][-1]["id"]

    run_socket(alice, scenario)
    assert [chat["id"] for page in pages for chat in page["chats"]] == expected
    assert [len(page["chats"]) for page in pages] == [2, 2, 2, 2, 1]
    assert [page["has_more"] for page in pages] == [True, True, True, True, False]


def test_each_listed_chat_shows_its_last_activity_and_a_preview_of_its_newest_message(alice: Any) -> None:
    long_reply = "Here is\n\n  what I found:   " + "x" * 200
    talked = make_chat(alice, "talked", minutes=10, messages=["What is open?", long_reply])
    # The assistant's own notes (summaries of older turns) are never the preview.
    AgentMessage.objects.create(chat=talked, owner=alice, role=AgentMessage.Role.SUMMARY, content="SECRET NOTE")
    silent = make_chat(alice, "silent", minutes=5)
    newest = AgentMessage.objects.filter(chat=talked, role="assistant").get()

    async def scenario(socket: WebsocketCommunicator) -> None:
        listed = await ask(socket, {"type": "assistant.chats"})
        assert [chat["title"] for chat in listed["chats"]] == ["talked", "silent"]
        first, second = listed["chats"]
        assert first["last_activity"] == newest.created_at.isoformat()
        assert first["preview"] == ("Here is what I found: " + "x" * 200)[:120]
        assert second["last_activity"] == silent.last_activity_at.isoformat() and second["preview"] == ""
        assert listed["has_more"] is False

    run_socket(alice, scenario)


def test_a_page_of_chats_is_two_queries_whatever_its_size(
    alice: Any, django_assert_num_queries: Callable[..., Any]
) -> None:
    for i in range(40):
        make_chat(alice, f"c{i}", minutes=i, messages=["question", "answer"])
    with django_assert_num_queries(2):
        page = selectors.chats_list(user=alice, limit=30)
    assert len(page.chats) == 30 and len(page.latest) == 30 and page.has_more
    with django_assert_num_queries(2):
        older = selectors.chats_list(user=alice, before=page.chats[-1].pk, limit=30)
    assert len(older.chats) == 10 and not older.has_more


def test_the_list_refuses_bad_fields_and_cursors_that_are_not_the_persons_chats(alice: Any, bob: Any) -> None:
    mine = make_chat(alice, "mine", minutes=1)
    gone = make_chat(alice, "gone", minutes=2)
    AgentChat.objects.filter(pk=gone.pk).update(deleted_at=timezone.now())
    theirs = make_chat(bob, "theirs", minutes=3)

    async def scenario(socket: WebsocketCommunicator) -> None:
        for fields, code in [
            ({"limit": 0}, "bad_request"), ({"limit": 101}, "bad_request"), ({"limit": "5"}, "bad_request"),
            ({"limit": True}, "bad_request"), ({"limit": 2.5}, "bad_request"), ({"before": "abc"}, "bad_request"),
            ({"before": 0}, "bad_request"), ({"before": theirs.pk}, "not_found"), ({"before": gone.pk}, "not_found"),
            ({"before": 900_000_000}, "not_found"),
        ]:
            answer = await ask(socket, {"type": "assistant.chats", **fields})
            assert (answer["type"], answer.get("code")) == ("assistant.error", code), fields
        # The person's own oldest chat as the cursor: nothing older, and that is not an error.
        answer = await ask(socket, {"type": "assistant.chats", "before": mine.pk, "limit": 100})
        assert (answer["chats"], answer["has_more"]) == ([], False)

    run_socket(alice, scenario)


# --- rename and delete, seen in every tab ----------------------------------------------------------


def test_a_rename_in_one_tab_is_seen_in_the_other_and_bad_titles_change_nothing(alice: Any) -> None:
    chat = make_chat(alice, "Old title", minutes=1, messages=["hello"])
    other = make_chat(alice, "Newer chat", minutes=2)
    tab1, tab2 = connect(alice), connect(alice)

    async def scenario() -> None:
        assert (await tab1.connect())[0] and (await tab2.connect())[0]
        for title in ["   ", "x" * 201, 42, None, "a\x00b"]:
            answer = await ask(tab1, {"type": "assistant.chat_rename", "chat_id": chat.pk, "title": title})
            assert (answer["type"], answer["code"]) == ("assistant.error", "bad_request"), title
        await tab1.send_json_to({"type": "assistant.chat_rename", "chat_id": chat.pk, "title": "  Groceries  "})
        for tab in (tab1, tab2):
            updated = await tab.receive_json_from(timeout=5)
            assert updated["type"] == "assistant.chat_updated" and updated["chat_id"] == chat.pk
            assert updated["chat"]["title"] == "Groceries" and updated["chat"]["preview"] == "hello"
        answer = await ask(tab2, {"type": "assistant.chat_rename", "chat_id": chat.pk, "title": "y" * 200})
        assert answer["chat"]["title"] == "y" * 200
        assert (await tab1.receive_json_from(timeout=5))["chat"]["title"] == "y" * 200
        assert await settle((tab1, alice), (tab2, alice)) == [[], []]  # one update each, nothing for the refused
        await tab1.disconnect()
        await tab2.disconnect()

    asyncio.run(scenario())
    renamed = AgentChat.objects.get(pk=chat.pk)
    assert renamed.title == "y" * 200
    # Renaming is not using: the chat keeps its place and the newer chat stays current.
    assert (renamed.updated_at, renamed.last_activity_at) == (chat.updated_at, chat.last_activity_at)
    assert selectors.chat_current(user=alice) == other


def test_a_deleted_chat_is_gone_from_every_tab_and_every_path_but_kept_for_staff(alice: Any, bob: Any) -> None:
    older = make_chat(alice, "older", minutes=1, messages=["old question", "old answer"])
    doomed = make_chat(alice, "doomed", minutes=2, messages=["secret question", "secret answer"])
    message_ids = list(doomed.messages.values_list("pk", flat=True))
    tab1, tab2 = connect(alice), connect(alice)

    async def scenario() -> None:
        assert (await tab1.connect())[0] and (await tab2.connect())[0]
        await tab1.send_json_to({"type": "assistant.chat_delete", "chat_id": doomed.pk})
        for tab in (tab1, tab2):
            deleted = await tab.receive_json_from(timeout=5)
            assert unnumbered(deleted) == {"type": "assistant.chat_deleted", "chat_id": doomed.pk}
        listed = await ask(tab2, {"type": "assistant.chats"})
        assert [chat["id"] for chat in listed["chats"]] == [older.pk]
        failed = await ask(tab2, {"type": "assistant.load", "chat_id": doomed.pk, "request_id": "l"})
        assert failed == {"type": "assistant.thread_failed", "chat_id": doomed.pk,
                          "error": "That conversation does not exist.", "request_id": "l"}
        current = await ask(tab2, {"type": "assistant.load"})
        assert current["chat"]["id"] == older.pk
        assert [m["content"] for m in current["messages"]] == ["old question", "old answer"]
        for event in [
            {"type": "assistant.send", "content": "still there?", "chat_id": doomed.pk},
            {"type": "assistant.chat_rename", "chat_id": doomed.pk, "title": "back"},
            {"type": "assistant.chat_delete", "chat_id": doomed.pk},
            {"type": "assistant.chats", "before": doomed.pk},
            {"type": "assistant.load", "chat_id": older.pk, "before": message_ids[-1]},
        ]:
            answer = await ask(tab1, event)
            assert (answer["type"], answer["code"]) == ("assistant.error", "not_found"), event
        assert await settle((tab1, alice), (tab2, alice)) == [[], []]  # the refused events announced nothing
        await tab1.disconnect()
        await tab2.disconnect()

    asyncio.run(scenario())
    kept = AgentChat.objects.get(pk=doomed.pk)
    assert kept.deleted_at is not None and kept.title == "doomed"
    assert list(kept.messages.values_list("pk", flat=True)) == message_ids
    assert not AgentRun.objects.exists()  # the refused send stored nothing
    assert not AgentChat.objects.for_user(alice).filter(pk=doomed.pk).exists()
    assert not AgentMessage.objects.for_user(alice).filter(chat=doomed).exists()
    # A send with no chat named goes to the chat that is left, never back into the deleted one.
    assert selectors.chat_current(user=alice) == older


@pytest.mark.worker
def test_deleting_a_chat_while_its_run_works_stops_the_run_and_the_worker(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(openai_stream([f"word{i} " for i in range(40)]))
    fake_openai._replies[-1].sse_interval = 0.2  # 8 s to write it all
    tab1, tab2 = connect(alice), connect(alice)

    async def scenario() -> None:
        assert (await tab1.connect())[0] and (await tab2.connect())[0]
        await tab1.send_json_to({"type": "assistant.send", "content": "tell me a long story"})
        events = await receive_until(tab1, lambda event: event["type"] == "assistant.token")
        chat_id, run_id = events[0]["chat_id"], events[0]["run_id"]
        await tab1.send_json_to({"type": "assistant.chat_delete", "chat_id": chat_id})
        rest = await receive_until(tab2, lambda event: event["type"] == "assistant.cancelled", timeout=5)
        assert {"type": "assistant.chat_deleted", "chat_id": chat_id} in [unnumbered(event) for event in rest]
        assert rest[-1]["run"]["status"] == "cancelled" and rest[-1]["run_id"] == run_id
        # The run is gone with its chat: stopping it again is "not found", like any id not the person's.
        answer = await ask(tab1, {"type": "assistant.cancel", "run_id": run_id, "request_id": "again"})
        while answer["type"] != "assistant.error":  # tab 1's copies of the run's last events
            answer = await tab1.receive_json_from(timeout=5)
        assert (answer["code"], answer["request_id"]) == ("not_found", "again")
        await tab1.disconnect()
        await tab2.disconnect()

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        asyncio.run(scenario())
    celery_worker.wait_idle(timeout=5)
    run = AgentRun.objects.get()
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    assert not AgentMessage.objects.filter(role="assistant").exists()
    assert run.steps.get(kind="model_call").result["interrupted"] is True  # kept for staff


@pytest.mark.worker
def test_deleting_a_chat_with_a_question_waiting_closes_it_not_taken_and_it_cannot_be_answered(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="delete Home").run
    wait_for_run(run.pk, "awaiting_confirmation")
    pending = AgentStep.objects.get(run=run, state="awaiting_confirmation")

    async def scenario(socket: WebsocketCommunicator) -> None:
        await socket.send_json_to({"type": "assistant.chat_delete", "chat_id": run.chat_id})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.chat_deleted")
        assert [e["type"] for e in events] == ["assistant.step", "assistant.cancelled", "assistant.chat_deleted"]
        # Not answered (deleting the chat is not a "no"), not taken, and the record says why.
        closed = events[0]["step"]
        assert (closed["state"], closed["confirmation"], closed["took_effect"]) == ("finished", "", False)
        assert closed["result"]["status"] == "not_run"
        assert closed["reason"] == "You stopped the run instead of answering; the action was not taken."
        answer = await ask(socket, {"type": "assistant.confirm", "run_id": run.pk, "step_id": pending.pk,
                                    "approve": True})
        assert (answer["type"], answer["code"]) == ("assistant.error", "not_found")
        assert await settle((socket, alice)) == [[]]

    run_socket(alice, scenario)
    celery_worker.caught_up()  # had the refused approval queued the run again, the worker would have run it
    assert Project.objects.filter(pk=home.pk).exists()
    assert AgentRun.objects.get().status == "cancelled"


# --- paging older messages, and the steps of past runs ---------------------------------------------


def test_paging_older_messages_returns_every_message_exactly_once_oldest_first(alice: Any) -> None:
    chat = make_chat(alice, "long", minutes=1, messages=[f"m{i}" for i in range(123)])
    # Messages written in the same instant still page apart; the assistant's notes never appear.
    same = list(chat.messages.order_by("id")[60:64])
    AgentMessage.objects.filter(pk__in=[m.pk for m in same]).update(created_at=same[0].created_at)
    AgentMessage.objects.create(chat=chat, owner=alice, role=AgentMessage.Role.SUMMARY, content="NOTE")
    expected = [m["content"] for m in chat.messages.exclude(role="summary").order_by("created_at", "id").values()]

    pages: list[dict[str, Any]] = []

    async def scenario(socket: WebsocketCommunicator) -> None:
        first = await ask(socket, {"type": "assistant.load", "chat_id": chat.pk, "limit": 40})
        pages.append(first)
        while pages[-1]["has_more"]:
            oldest = pages[-1]["messages"][0]["id"]
            page = await ask(socket, {"type": "assistant.load", "chat_id": chat.pk, "before": oldest, "limit": 40})
            assert page["before"] == oldest and page["chat"]["id"] == chat.pk
            pages.append(page)

    run_socket(alice, scenario)
    shown = [m["content"] for page in reversed(pages) for m in page["messages"]]
    assert shown == expected
    assert [len(page["messages"]) for page in pages] == [40, 40, 40, 3]


def test_a_load_without_new_fields_is_as_before_but_holds_the_newest_fifty(alice: Any) -> None:
    chat = make_chat(alice, "long", minutes=1, messages=[f"m{i}" for i in range(60)])

    async def scenario(socket: WebsocketCommunicator) -> None:
        loaded = await ask(socket, {"type": "assistant.load", "request_id": "r"})
        assert loaded["chat"]["id"] == chat.pk and loaded["request_id"] == "r"
        assert [m["content"] for m in loaded["messages"]] == [f"m{i}" for i in range(10, 60)]
        assert (loaded["has_more"], loaded["before"]) == (True, None)
        assert (loaded["active_run"], loaded["steps"], loaded["pending_confirmation"]) == (None, [], None)
        assert "runs" not in loaded
        assert loaded["chat"]["preview"] == "m59"

    run_socket(alice, scenario)


def test_load_refuses_bad_paging_fields_and_cursors_from_elsewhere(alice: Any, bob: Any) -> None:
    mine = make_chat(alice, "mine", minutes=2, messages=["a", "b"])
    other = make_chat(alice, "other", minutes=1, messages=["c"])
    theirs = make_chat(bob, "theirs", minutes=1, messages=["d"])
    own_message = mine.messages.first().pk
    elsewhere = [other.messages.get().pk, theirs.messages.get().pk, 900_000_000]

    async def scenario(socket: WebsocketCommunicator) -> None:
        for fields, code in [
            ({"limit": 0}, "bad_request"), ({"limit": 201}, "bad_request"), ({"limit": "10"}, "bad_request"),
            ({"limit": False}, "bad_request"), ({"steps": "yes"}, "bad_request"), ({"steps": 1}, "bad_request"),
            ({"before": -1}, "bad_request"), ({"before": "x"}, "bad_request"),
        ]:
            answer = await ask(socket, {"type": "assistant.load", "chat_id": mine.pk, **fields})
            assert (answer["type"], answer.get("code")) == ("assistant.error", code), fields
        # A page of history names its chat.
        answer = await ask(socket, {"type": "assistant.load", "before": own_message})
        assert answer["code"] == "bad_request"
        # A cursor from another chat, another person or nowhere: the same answer.
        answers = []
        for before in elsewhere:
            answer = await ask(socket, {"type": "assistant.load", "chat_id": mine.pk, "before": before})
            assert (answer["type"], answer["code"]) == ("assistant.error", "not_found")
            answers.append(answer["message"].replace(str(before), "<id>"))
        assert len(set(answers)) == 1
        answer = await ask(socket, {"type": "assistant.load", "chat_id": mine.pk, "limit": 200, "steps": False})
        assert [m["content"] for m in answer["messages"]] == ["a", "b"] and answer["has_more"] is False

    run_socket(alice, scenario)


@pytest.mark.worker
def test_the_steps_of_past_runs_come_with_their_messages_on_request(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    first = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}}]}, {"text": "Done."})
    second = script({"text": "Nothing to do."})
    with assistant_settings_with(MODEL=first):
        run1 = chat_send(user=alice, content="record one").run
    wait_for_run(run1.pk, "succeeded")
    with assistant_settings_with(MODEL=second):
        run2 = chat_send(user=alice, content="and now?", chat_id=run1.chat_id).run
    wait_for_run(run2.pk, "succeeded")

    async def scenario(socket: WebsocketCommunicator) -> None:
        loaded = await ask(socket, {"type": "assistant.load", "chat_id": run1.chat_id, "steps": True})
        assert [m["run_id"] for m in loaded["messages"]] == [run1.pk, run1.pk, run2.pk, run2.pk]
        assert [run["id"] for run in loaded["runs"]] == [run1.pk, run2.pk]
        past = loaded["runs"][0]
        assert past["status"] == "succeeded" and past["tool_calls"] == 1
        assert [(s["seq"], s["kind"], s["tool_name"]) for s in past["steps"]] == [
            (1, "model_call", ""), (2, "tool_call", "test_record_effect"), (3, "model_call", "")]
        assert past["steps"][1]["arguments"] == {"label": "one"} and past["steps"][1]["took_effect"] is True
        assert [s["kind"] for s in loaded["runs"][1]["steps"]] == ["model_call"]
        assert loaded["steps"] == []  # no active run
        # Only the runs of the messages returned: the older page carries the first run alone.
        newest = loaded["messages"][2]["id"]
        older = await ask(socket, {"type": "assistant.load", "chat_id": run1.chat_id, "before": newest,
                                   "steps": True})
        assert [run["id"] for run in older["runs"]] == [run1.pk]
        assert len(older["runs"][0]["steps"]) == 3

    run_socket(alice, scenario)


def test_a_page_with_steps_is_a_fixed_number_of_queries_however_many_runs(
    alice: Any, django_assert_num_queries: Callable[..., Any]
) -> None:
    chat = make_chat(alice, "busy", minutes=1)
    answer = None
    for i in range(10):
        run = AgentRun.objects.create(owner=alice, chat=chat, status="succeeded")
        question = AgentMessage.objects.create(chat=chat, owner=alice, role="user", content=f"q{i}", run=run,
                                               parent=answer)
        answer = AgentMessage.objects.create(chat=chat, owner=alice, role="assistant", content=f"a{i}", run=run,
                                             parent=question)
        for seq in (1, 2, 3):
            AgentStep.objects.create(run=run, seq=seq, kind="model_call")
    with django_assert_num_queries(5):  # the branch, its messages and their attachments, runs, steps
        page = selectors.chat_messages_page(chat=chat, limit=20, with_steps=True)
    assert len(page.runs) == 10 and all(len(page.steps[run.pk]) == 3 for run in page.runs)


@pytest.mark.worker
def test_a_send_racing_a_delete_never_leaves_a_message_or_a_live_run_in_the_deleted_chat(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    """The send and the delete each take the chat's lock: a send that gets it first is cancelled by the
    delete; a send that comes second finds no chat. Never a run started in a chat already deleted."""
    model = script(*[{"text": "ok"}] * 20)
    outcomes: list[str] = []

    def send(chat_id: int, start: threading.Barrier) -> None:
        try:
            start.wait()
            chat_send(user=alice, content="racing", chat_id=chat_id)
            outcomes.append("sent")
        except selectors.NotFound:
            outcomes.append("refused")
        finally:
            connection.close()

    def delete(chat_id: int, start: threading.Barrier) -> None:
        try:
            start.wait()
            chat_delete(user=alice, chat_id=chat_id)
        finally:
            connection.close()

    chats = [make_chat(alice, f"race {i}", minutes=i) for i in range(8)]
    with assistant_settings_with(MODEL=model):
        for chat in chats:
            start = threading.Barrier(2)
            threads = [threading.Thread(target=send, args=(chat.pk, start)),
                       threading.Thread(target=delete, args=(chat.pk, start))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=20)
    assert len(outcomes) == len(chats)
    for chat in chats:
        chat.refresh_from_db()
        assert chat.deleted_at is not None
        for run in AgentRun.objects.filter(chat=chat):
            assert run.created_at < chat.deleted_at  # sent before the delete, never after
            wait_for_run(run.pk, "cancelled", "succeeded")
        assert not AgentMessage.objects.filter(chat=chat, created_at__gt=chat.deleted_at, role="user").exists()


@pytest.mark.worker
def test_a_reply_moves_its_chat_up_the_list_and_the_current_chat_stays_where_the_person_last_wrote(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    slow = script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]}, {"text": "Waited."})
    quick = script({"text": "Quick."})
    with assistant_settings_with(MODEL=slow):
        waited = chat_send(user=alice, content="wait a bit", new_chat=True).run
    with assistant_settings_with(MODEL=quick):
        answered = chat_send(user=alice, content="quick one", new_chat=True).run
    wait_for_run(answered.pk, "succeeded")
    assert [chat.pk for chat in selectors.chats_list(user=alice).chats] == [answered.chat_id, waited.chat_id]
    wait_for_run(waited.pk, "succeeded")
    # The reply is recorded as its chat's activity in the transaction that writes it.
    wait_for(lambda: selectors.chats_list(user=alice).chats[0].pk == waited.chat_id, timeout=5,
             what="the chat with the later reply to come first")
    reply = AgentMessage.objects.get(run=waited, role="assistant")

    async def scenario(socket: WebsocketCommunicator) -> None:
        listed = await ask(socket, {"type": "assistant.chats"})
        assert [chat["id"] for chat in listed["chats"]] == [waited.chat_id, answered.chat_id]
        assert listed["chats"][0]["last_activity"] == reply.created_at.isoformat()
        assert listed["chats"][0]["preview"] == "Waited."
        loaded = await ask(socket, {"type": "assistant.load"})
        assert loaded["chat"]["id"] == answered.chat_id

    run_socket(alice, scenario)
