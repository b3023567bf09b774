"""The live protocol end to end: a websocket client, the consumer, the real worker and the channel layer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentRun
from assistant.runs.lease import configured_lease_seconds
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until, settle
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tracker.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]





def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def test_send_streams_steps_then_the_reply_to_the_sender_only(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "ws"}}]},
        {"text": "Recorded."},
    )

    mine, theirs = connect(alice), connect(bob)

    async def scenario() -> None:
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        await mine.send_json_to({"type": "assistant.send", "content": "record it"})
        events = await receive_until(mine, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"})
        assert events[0]["type"] == "assistant.sent"
        assert events[0]["message"]["content"] == "record it"
        run_id = events[0]["run_id"]
        assert all(event["run_id"] == run_id for event in events)
        steps = [event["step"] for event in events if event["type"] == "assistant.step"]
        assert [e for e in events if e["type"] == "assistant.token"]  # the reply streamed before it landed
        # A tool step is announced when it starts and again when it finishes; a model call once it
        # has answered (its text streams meanwhile as token events). All in order.
        assert [(s["seq"], s["kind"], s["state"]) for s in steps] == [
            (1, "model_call", "finished"),
            (2, "tool_call", "started"), (2, "tool_call", "finished"),
            (3, "model_call", "finished"),
        ]
        assert steps[2]["tool_name"] == "test_record_effect" and steps[2]["took_effect"] is True
        replied = events[-1]
        assert replied["type"] == "assistant.replied"
        assert replied["message"]["content"] == "Recorded."
        assert replied["run"]["status"] == "succeeded"
        assert "".join(e["delta"] for e in events if e["type"] == "assistant.token") == "Recorded."
        # Bob's socket got nothing of it, up to the run's last event and everything published before it.
        assert await settle((theirs, bob)) == [[]]
        await mine.disconnect()
        await theirs.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())


def _lease_renewed(run_id: int) -> datetime:
    """Until the worker's heartbeat next renews the run's lease; the new expiry."""
    def expiry() -> datetime | None:
        return AgentRun.objects.values_list("lease_expires_at", flat=True).get(pk=run_id)

    before = expiry()
    return wait_for(lambda: (renewed := expiry()) != before and renewed, timeout=configured_lease_seconds(),
                    what="the lease to be renewed")


def test_tokens_stream_live_and_cancel_stops_a_streaming_reply_before_the_lease_heartbeat_could(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    words = 100
    fake_openai.queue(openai_stream([f"word{i} " for i in range(words)]))
    fake_openai._replies[-1].sse_interval = 0.2  # 20 s to write it all
    # The worker's lease (the same settings): its heartbeat renews it every third of it, and reads the
    # run's cancel flag from the database as it does, the backstop for a lost Redis flag.
    lease = timedelta(seconds=configured_lease_seconds())

    socket = connect(alice)

    async def scenario() -> None:
        await socket.connect()
        await socket.send_json_to({"type": "assistant.send", "content": "tell me a long story"})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.token")
        run_id = events[0]["run_id"]
        assert events[-1]["delta"].startswith("word0")
        # Sent just after a renewal, the cancel must stop the stream before the next one could notice it:
        # the reply's own check of the cancel flag did it, within a few of the stream's words.
        renewed = await database_sync_to_async(_lease_renewed)(run_id)
        await socket.send_json_to({"type": "assistant.cancel", "run_id": run_id})
        rest = await receive_until(socket, lambda event: event["type"] == "assistant.cancelled")
        arrived, next_heartbeat = timezone.now(), renewed - lease + lease / 3
        assert arrived < next_heartbeat, f"cancelled {arrived - next_heartbeat} after the next heartbeat"
        assert rest[-1]["run"]["status"] == "cancelled"
        assert "assistant.replied" not in types(rest)
        await socket.disconnect()

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        asyncio.run(scenario())
    run = AgentRun.objects.get()
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    # The interrupted call is kept in the record, with the text it had streamed.
    interrupted = run.steps.get(kind="model_call")
    assert interrupted.result["interrupted"] is True and interrupted.result["text"].startswith("word0")
    assert len(interrupted.result["text"].split()) < words  # cut short, not waited out
    assert interrupted.took_effect is False


def test_reload_gets_the_chat_the_active_run_and_its_pending_question(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
                   {"text": "Deleted."})
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="delete Home").run
    wait_for_run(run.pk, "awaiting_confirmation")

    socket = connect(alice)  # a fresh tab

    async def scenario() -> None:
        await socket.connect()
        await socket.send_json_to({"type": "assistant.load", "request_id": "r1"})
        loaded = await socket.receive_json_from(timeout=5)
        assert loaded["type"] == "assistant.messages_loaded" and loaded["request_id"] == "r1"
        assert [m["content"] for m in loaded["messages"]] == ["delete Home"]
        assert loaded["active_run"]["status"] == "awaiting_confirmation"
        assert loaded["pending_confirmation"]["tool_name"] == "tracker_project_delete"
        await socket.send_json_to({"type": "assistant.confirm", "run_id": run.pk,
                                   "step_id": loaded["pending_confirmation"]["id"], "approve": True})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.replied")
        assert events[-1]["message"]["content"] == "Deleted."
        await socket.disconnect()

    asyncio.run(scenario())
    assert not Project.objects.filter(pk=home.pk).exists()


def test_another_persons_ids_answer_like_missing_ones_and_bad_frames_keep_the_socket(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    bobs_chat = AgentChat.objects.create(owner=bob, title="bob's")
    bobs_run = AgentRun.objects.create(owner=bob, chat=bobs_chat, status="awaiting_confirmation")

    socket = connect(alice)

    async def scenario() -> None:
        await socket.connect()
        for frame, expected in [
            ({"type": "assistant.load", "chat_id": bobs_chat.pk}, "assistant.thread_failed"),
            ({"type": "assistant.load", "chat_id": 999_999}, "assistant.thread_failed"),
            ({"type": "assistant.cancel", "run_id": bobs_run.pk}, "not_found"),
            ({"type": "assistant.cancel", "run_id": 999_999}, "not_found"),
            ({"type": "assistant.confirm", "run_id": bobs_run.pk, "step_id": 1, "approve": True}, "not_found"),
            ({"type": "assistant.send", "content": "hi", "chat_id": bobs_chat.pk}, "not_found"),
            ({"type": "assistant.send", "content": 42}, "bad_request"),
            ({"type": "assistant.send", "content": "   "}, "empty_message"),
            ({"type": "assistant.send", "content": "\u200b\u202e \u2066"}, "empty_message"),  # nothing visible
            ({"type": "assistant.send", "content": "x" * 9_000}, "message_too_long"),
            ({"type": "assistant.cancel", "run_id": "abc"}, "bad_request"),
            ({"type": "assistant.cancel", "run_id": 0}, "bad_request"),
            ({"type": "assistant.confirm", "run_id": bobs_run.pk, "step_id": 1, "approve": "yes"}, "bad_request"),
        ]:
            await socket.send_json_to(frame)
            answer = await socket.receive_json_from(timeout=5)
            assert expected in (answer["type"], answer.get("code")), (frame, answer)
        await socket.send_json_to({"type": "assistant.ping", "id": 1})
        assert (await socket.receive_json_from(timeout=5))["type"] == "assistant.pong"
        await socket.disconnect()

    asyncio.run(scenario())
    bobs_run.refresh_from_db()
    assert bobs_run.status == "awaiting_confirmation"  # untouched
    assert not AgentRun.objects.filter(owner=alice).exists()


def test_a_second_message_while_the_assistant_works_is_refused_with_a_reason(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]}, {"text": "done"})

    socket = connect(alice)

    async def scenario() -> None:
        await socket.connect()
        await socket.send_json_to({"type": "assistant.send", "content": "wait", "request_id": "first"})
        sent = await receive_until(socket, lambda event: event["type"] == "assistant.sent")
        assert sent[-1]["request_id"] == "first"
        await socket.send_json_to({"type": "assistant.send", "content": "and another", "request_id": "second"})
        refused = await receive_until(socket, lambda event: event["type"] == "assistant.error")
        assert refused[-1]["code"] == "run_active" and refused[-1]["request_id"] == "second"
        await receive_until(socket, lambda event: event["type"] == "assistant.replied")
        await socket.disconnect()
        assert sent[-1]["chat_id"] == await database_sync_to_async(lambda: AgentChat.objects.get().pk)()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
