"""Every event to a person carries the next number of that person's sequence (`event_seq`), whichever
process published it, so a socket that missed one sees the gap (the channel layer delivers at most once).
Through the real consumer, the real worker, the real channel layer and Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from assistant.conversation import services
from assistant.live.events import publisher, user_group
from assistant.models import AgentChat
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with

pytestmark = [pytest.mark.django_db(transaction=True)]

ENDED = {"assistant.replied", "assistant.reply_failed"}


def numbered(events: list[dict[str, Any]]) -> list[int]:
    """The numbers of the live events among `events` (the answers to loads say where a count starts)."""
    return [event["event_seq"] for event in events
            if event["type"] != "assistant.messages_loaded" and isinstance(event.get("event_seq"), int)]


async def load(socket: WebsocketCommunicator, **fields: Any) -> dict[str, Any]:
    await socket.send_json_to({"type": "assistant.load", "request_id": "start", **fields})
    events = await receive_until(socket, lambda event: event["type"] == "assistant.messages_loaded")
    return events[-1]


@pytest.mark.worker
def test_two_tabs_see_one_contiguous_count_across_the_web_process_and_the_worker_and_not_anothers(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "two"}}]},
        {"text": "Recorded twice."},
    )
    first, second, theirs = connect(alice), connect(alice), connect(bob)

    async def scenario() -> None:
        for socket in (first, second, theirs):
            assert (await socket.connect())[0]
        starts = [(await load(socket))["event_seq"] for socket in (first, second, theirs)]
        assert starts[0] == starts[1] and isinstance(starts[0], int)  # one person, one count
        with assistant_settings_with(MODEL=model):
            await first.send_json_to({"type": "assistant.send", "content": "record it twice"})
            await theirs.send_json_to({"type": "assistant.send", "content": "record it twice"})
            seen = await asyncio.gather(*(receive_until(socket, lambda e: e["type"] in ENDED)
                                          for socket in (first, second, theirs)))
        for socket in (first, second, theirs):
            await socket.disconnect()
        mine, other, bobs = seen
        # The web process announced the message (assistant.sent), the worker every step and the reply.
        assert [e["type"] for e in mine][0] == "assistant.sent" and mine[-1]["type"] == "assistant.replied"
        assert len(numbered(mine)) == len(mine) >= 6
        assert sorted(numbered(mine)) == list(range(starts[0] + 1, starts[0] + 1 + len(mine)))
        assert numbered(other) == numbered(mine)  # the second tab saw every one of them
        # Bob's events, published meanwhile by the same processes, took none of Alice's numbers.
        assert sorted(numbered(bobs)) == list(range(starts[2] + 1, starts[2] + 1 + len(bobs)))

    asyncio.run(scenario())


@pytest.mark.worker
def test_a_message_is_announced_before_its_runs_first_event_even_by_a_web_process_slow_to_publish(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    """A busy web process's publishing thread may wait its turn longer than a worker takes to answer. Then
    a first message's reply reached the panel before the message did: the panel, not yet knowing the new
    chat, let the reply go by, and showed a message with no answer until a reload."""
    model = script({"text": "Quick."})
    sender, other_tab = connect(alice), connect(alice)

    async def scenario() -> None:
        for socket in (sender, other_tab):
            assert (await socket.connect())[0]
            await load(socket)
        # This process's publishing thread held up, as a busy process holds it, for longer than the
        # worker takes to answer a one-step run.
        publisher._ensure_started().call_soon_threadsafe(time.sleep, 0.5)
        with assistant_settings_with(MODEL=model):
            await sender.send_json_to({"type": "assistant.send", "content": "hello", "new_chat": True})
            seen = await asyncio.gather(*(receive_until(socket, lambda e: e["type"] in ENDED)
                                          for socket in (sender, other_tab)))
        for socket in (sender, other_tab):
            await socket.disconnect()
        for events in seen:
            assert [event["type"] for event in events][0] == "assistant.sent", [e["type"] for e in events]
            assert events[-1]["type"] == "assistant.replied"
            assert numbered(events) == sorted(numbered(events))

    asyncio.run(scenario())


def test_a_socket_that_missed_an_event_sees_the_gap_and_a_reload_catches_up(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice, title="Groceries")
    first, second = connect(alice), connect(alice)
    group = user_group(alice.pk)

    async def scenario() -> None:
        layer = get_channel_layer()
        assert (await first.connect())[0]
        # The first tab's channel: the only one of this process in the person's group so far.
        members = layer._get_layer().groups[layer._get_layer()._get_group_channel_name(group)]
        (first_channel,) = members
        assert (await second.connect())[0]
        start = (await load(first, chat_id=chat.pk))["event_seq"]
        assert (await load(second, chat_id=chat.pk))["event_seq"] == start
        # The first tab's channel leaves the group for a moment, as a dropped subscription does:
        # the rename in the meantime never reaches it.
        await layer.group_discard(group, first_channel)
        await database_sync_to_async(services.chat_rename)(user=alice, chat_id=chat.pk, title="Food")
        missed = await receive_until(second, lambda e: e["type"] == "assistant.chat_updated")
        await layer.group_add(group, first_channel)
        await database_sync_to_async(services.chat_rename)(user=alice, chat_id=chat.pk, title="Food and drink")
        after = await receive_until(first, lambda e: e["type"] == "assistant.chat_updated")
        assert numbered(missed) == [start + 1]
        assert numbered(after) == [start + 2]  # start + 1 never came: the first tab knows it missed one
        assert after[-1]["chat"]["title"] == "Food and drink"
        # Reloading is how the client catches up: the answer is as of a number no older than the last seen.
        reloaded = await load(first, chat_id=chat.pk)
        assert reloaded["event_seq"] >= start + 2 and reloaded["chat"]["title"] == "Food and drink"
        await first.disconnect()
        await second.disconnect()

    asyncio.run(scenario())


async def _collect(group: str, publish: Callable[[], None], until: Callable[[dict[str, Any]], bool],
                   timeout: float = 10) -> list[dict[str, Any]]:
    """Subscribe to `group`, call `publish()` in a thread and collect its events until one satisfies `until`."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        await asyncio.to_thread(publish)
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while not events or not until(events[-1]):
            message = await asyncio.wait_for(layer.receive(channel), timeout=max(0.1, deadline - time.monotonic()))
            events.extend(message["events"])
        return events
    finally:
        await layer.group_discard(group, channel)


def test_without_the_count_the_event_still_goes_unnumbered_and_a_resync_follows(alice: Any) -> None:
    group = user_group(alice.pk)
    step = {"type": "assistant.step", "run_id": 1, "chat_id": 1, "step": {"seq": 1}}

    def publish_without_the_count() -> None:
        # Nothing listens on port 1: the Redis that keeps the count is out of reach; the channel layer is not.
        with assistant_settings_with(REDIS_URL="redis://127.0.0.1:1/0"):
            publisher.publish(group, step)
            assert publisher.flush(timeout=10)

    events = asyncio.run(_collect(group, publish_without_the_count, lambda e: e["type"] == "assistant.resync"))
    assert events[0] == step  # on time, as it was, only without a number
    assert events[-1]["type"] == "assistant.resync" and events[-1]["reason"] == "lost"
    # With the count back, events are numbered again.
    again = asyncio.run(_collect(group, lambda: publisher.publish(group, step),
                                 lambda e: e["type"] == "assistant.step"))
    assert isinstance(again[-1]["event_seq"], int)
