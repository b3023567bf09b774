"""Publishing live events on the real channel layer: in order, steps gathered into few messages, and
what a person waits on sent at once, taking what waits before it along."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.layers import get_channel_layer

from assistant.live.events import COALESCE_SECONDS, publisher, user_group
from assistant.testing.sockets import unnumbered


async def _listen(group: str, publish: Any, events: int) -> tuple[list[list[dict[str, Any]]], float]:
    """Subscribe to `group`, call `publish()` (in a thread, as a worker's code would) and collect the
    channel-layer messages until `events` events have arrived; returns the messages and the seconds
    until the last one."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    try:
        started = time.monotonic()
        await asyncio.to_thread(publish)
        received: list[list[dict[str, Any]]] = []
        while sum(len(message) for message in received) < events:
            received.append((await asyncio.wait_for(layer.receive(channel), timeout=5))["events"])
        return received, time.monotonic() - started
    finally:
        await layer.group_discard(group, channel)


def _step(seq: int) -> dict[str, Any]:
    return {"type": "assistant.step", "run_id": 1, "chat_id": 1, "step": {"seq": seq}}


def test_steps_published_close_together_arrive_in_few_messages_in_order() -> None:
    def publish() -> None:
        for seq in range(1, 5):
            publisher.publish(user_group(901), _step(seq))
            time.sleep(0.002)  # a quick tool's worth of work between two steps

    received, _ = asyncio.run(_listen(user_group(901), publish, 4))
    assert [event["step"]["seq"] for message in received for event in message] == [1, 2, 3, 4]
    assert len(received) < 4  # gathered (all four in one message, unless the machine stalled meanwhile)


def test_the_reply_leaves_at_once_and_takes_the_waiting_steps_along() -> None:
    replied = {"type": "assistant.replied", "run_id": 1, "chat_id": 1}

    def publish() -> None:
        publisher.publish(user_group(902), _step(1))
        publisher.publish(user_group(902), {"type": "assistant.token", "run_id": 1, "chat_id": 1, "delta": "Do"})
        publisher.publish(user_group(902), {"type": "assistant.token", "run_id": 1, "chat_id": 1, "delta": "ne."})
        publisher.publish(user_group(902), replied)

    received, _ = asyncio.run(_listen(user_group(902), publish, 3))
    events = [event for message in received for event in message]
    assert [event["type"] for event in events] == ["assistant.step", "assistant.token", "assistant.replied"]
    assert events[1]["delta"] == "Done."  # adjacent deltas of one run travelling together are merged
    assert unnumbered(received[-1][-1]) == replied


def test_a_lone_step_is_not_held_back_for_long() -> None:
    # Timed against the reply, which leaves at once, over the same path: a lone step waits COALESCE_SECONDS
    # for company, then goes alone. The quickest of a few tries each, as a busy machine only adds time.
    replied = {"type": "assistant.replied", "run_id": 1, "chat_id": 1}

    async def tries() -> tuple[list[float], list[float]]:
        steps, replies = [], []
        for _ in range(5):
            for event, times in ((_step(7), steps), (replied, replies)):
                def publish(event: dict[str, Any] = event) -> None:
                    publisher.publish(user_group(903), event)

                received, seconds = await _listen(user_group(903), publish, 1)
                assert [[unnumbered(got) for got in message] for message in received] == [[event]]
                times.append(seconds)
        return steps, replies

    steps, replies = asyncio.run(tries())
    assert min(steps) < min(replies) + 10 * COALESCE_SECONDS, (steps, replies)


def test_events_for_different_people_are_kept_apart() -> None:
    async def both() -> tuple[list[Any], list[Any]]:
        layer = get_channel_layer()
        channels = {}
        for user_id in (904, 905):
            channels[user_id] = await layer.new_channel()
            await layer.group_add(user_group(user_id), channels[user_id])

        def publish() -> None:
            publisher.publish(user_group(904), _step(1))
            publisher.publish(user_group(905), _step(2))
            publisher.publish(user_group(904), _step(3))

        await asyncio.to_thread(publish)
        first = (await asyncio.wait_for(layer.receive(channels[904]), timeout=5))["events"]
        second = (await asyncio.wait_for(layer.receive(channels[905]), timeout=5))["events"]
        if len(first) < 2:  # 904's events may travel in two messages around 905's; they stay in order
            first += (await asyncio.wait_for(layer.receive(channels[904]), timeout=5))["events"]
        return first, second

    first, second = asyncio.run(both())
    assert [event["step"]["seq"] for event in first] == [1, 3]
    assert [event["step"]["seq"] for event in second] == [2]
