"""Nothing a model or a person writes makes an event vanish: every event is bounded and packed on its own,
so one odd value cannot take its batch (an approval card among them) down with it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest
from channels.layers import get_channel_layer

from assistant.live.events import MAX_EVENT_BYTES, MAX_EVENT_STRING_CHARS, publisher, resync_event, user_group
from assistant.models import AgentChat, AgentMessage
from assistant.testing.sockets import connect, receive_until, unnumbered
from tests.browser.harness import CHROMIUM, log_in  # the `page` and `site_url` fixtures are the harness's too
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project

HUGE = 2**64  # one past what msgpack packs




@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_approval_card_whose_arguments_hold_a_huge_integer_still_appears(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": HUGE}}]},
                   {"text": "That project does not exist."})
    socket = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "delete project 18446744073709551616"})
        events = await receive_until(socket, lambda event: event["type"] == "assistant.confirm")
        await socket.disconnect()
        return events

    with assistant_settings_with(MODEL=model):
        events = asyncio.run(scenario())
    card = events[-1]
    # The card shows exactly the number that would be used: as digits, since a browser would round it.
    assert card["step"]["arguments"] == {"pk": str(HUGE)}
    assert card["tool"]["name"] == "tracker_project_delete"
    steps = [event["step"] for event in events if event["type"] == "assistant.step"]
    assert [(step["kind"], step["state"]) for step in steps] == [
        ("model_call", "finished"), ("tool_call", "awaiting_confirmation"),
    ]
    run = wait_for_run(card["run_id"], "awaiting_confirmation")
    assert run.steps.get(kind="tool_call").arguments == {"pk": HUGE}  # the row keeps the value as it was


async def _collect(group: str, publish: Callable[[], None], events: int) -> list[dict[str, Any]]:
    """Subscribe to `group` on the real channel layer, publish (from a thread, as a worker does) and
    collect `events` events."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        await asyncio.to_thread(publish)
        received: list[dict[str, Any]] = []
        while len(received) < events:
            received += (await asyncio.wait_for(layer.receive(channel), timeout=5))["events"]
        return received
    finally:
        await layer.group_discard(group, channel)


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_odd_values_are_bounded_and_never_take_their_batch_down() -> None:
    group = user_group(911)
    odd = {
        "huge": HUGE, "negative": -HUGE, "unsafe": 2**53 + 1, "safe": 2**53 - 1, "nan": float("nan"),
        "inf": float("inf"), "surrogate": "a\ud800b", "pair": "\ud83d\ude00", "deep": _deep(1_000),
        "long": "x" * (MAX_EVENT_STRING_CHARS + 5), "bytes": b"\x00\x01", "keys": {1: "one"},
    }

    def publish() -> None:
        publisher.publish(group, {"type": "assistant.step", "run_id": 1, "chat_id": 1, "step": {"seq": 1}})
        publisher.publish(group, {"type": "assistant.step", "run_id": 1, "chat_id": 1, "step": {"seq": 2, **odd}})
        publisher.publish(group, {"type": "assistant.confirm", "run_id": 1, "chat_id": 1, "step": {"seq": 3}})

    received = asyncio.run(_collect(group, publish, 3))
    assert [event["step"]["seq"] for event in received] == [1, 2, 3]
    step = received[1]["step"]
    assert (step["huge"], step["negative"], step["unsafe"], step["safe"]) == (
        str(HUGE), str(-HUGE), str(2**53 + 1), 2**53 - 1)
    assert (step["nan"], step["inf"]) == ("nan", "inf")
    assert step["surrogate"] == "a\ufffdb" and step["pair"] == "\U0001f600"
    depth, value = 0, step["deep"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert value == "…" and depth < 40
    assert step["long"].startswith("x" * MAX_EVENT_STRING_CHARS) and step["long"].endswith("(5 more characters)")
    assert step["bytes"] == "b'\\x00\\x01'" and step["keys"] == {"1": "one"}


def test_an_event_too_large_to_publish_becomes_a_resync_for_its_run_and_its_neighbours_arrive() -> None:
    group = user_group(912)
    rows = [{"text": "y" * MAX_EVENT_STRING_CHARS} for _ in range(MAX_EVENT_BYTES // MAX_EVENT_STRING_CHARS + 5)]

    def publish() -> None:
        publisher.publish(group, {"type": "assistant.step", "run_id": 7, "chat_id": 3, "step": {"seq": 1}})
        publisher.publish(group, {"type": "assistant.step", "run_id": 7, "chat_id": 3, "step": {"rows": rows}})
        publisher.publish(group, {"type": "assistant.replied", "run_id": 7, "chat_id": 3})

    received = asyncio.run(_collect(group, publish, 3))
    assert [unnumbered(event) for event in received] == [
        {"type": "assistant.step", "run_id": 7, "chat_id": 3, "step": {"seq": 1}},
        {"type": "assistant.resync", "reason": "too_large", "run_id": 7, "chat_id": 3},
        {"type": "assistant.replied", "run_id": 7, "chat_id": 3},
    ]


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM and not os.environ.get("CI"), reason="Debian's chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_panel_reloads_the_chat_when_told_to_resync(page: Any, site_url: str, alice: Any) -> None:
    log_in(page, site_url, "alice")
    page.click(".assistant-launcher")
    page.wait_for_selector("#assistant-dock .assistant-empty")  # the panel has loaded: no chat yet
    # Written while the panel was told nothing (its events lost on the way).
    chat = AgentChat.objects.create(owner=alice, title="Missed")
    AgentMessage.objects.create(chat=chat, owner=alice, role="user", content="Sent while events were lost")
    publisher.publish(user_group(alice.pk), resync_event("lost"))
    assert publisher.flush()
    page.wait_for_selector("#assistant-dock .assistant-message.is-user:has-text('Sent while events were lost')")
