"""Redis out of reach from the web process: a send is kept and answered once Redis is back, the socket
stays open, and events lost meanwhile are followed by `assistant.resync`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.live.events import RESYNC_SETTLE_SECONDS, publisher, user_group
from assistant.models import AgentMessage, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until, unnumbered
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.faults.redis_outage import CuttableProxy, redis_through_proxy

pytestmark = pytest.mark.django_db(transaction=True)



@pytest.fixture
def outage() -> Iterator[CuttableProxy]:
    with redis_through_proxy() as proxy:
        yield proxy




async def pong(socket: WebsocketCommunicator, ping_id: str) -> bool:
    await socket.send_json_to({"type": "assistant.ping", "id": ping_id})
    return await socket.receive_json_from(timeout=5) == {"type": "assistant.pong", "id": ping_id}


@pytest.mark.worker
def test_a_send_while_redis_is_unreachable_is_kept_and_answered_once_redis_is_back(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, outage: CuttableProxy
) -> None:
    fake_openai.queue(openai_stream(["Here after ", "the outage."]))
    socket = connect(alice)

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        assert (await socket.connect())[0]
        assert await pong(socket, "before")
        outage.cut()
        await socket.send_json_to({"type": "assistant.send", "content": "Are you there?", "request_id": "s1"})
        during = await receive_until(socket, lambda event: event["type"] == "assistant.error")
        assert await pong(socket, "during")  # the socket stays open
        outage.restore()
        await until_events_arrive_again(socket, alice.pk)
        # The run waits in the database; a worker's periodic sweep queues it again once it is overdue.
        await database_sync_to_async(_make_overdue)(during[0]["run_id"])
        after = await receive_until(socket, lambda event: event["type"] == "assistant.replied", timeout=30)
        await socket.disconnect()
        return during, after

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        during, after = asyncio.run(scenario())

    sent, error = during
    assert (sent["type"], sent["request_id"], sent["message"]["content"]) == ("assistant.sent", "s1", "Are you there?")
    assert (error["code"], error["request_id"]) == ("unavailable", "s1")
    assert "saved" in error["message"]
    assert after[-1]["message"]["content"] == "Here after the outage."
    run = wait_for_run(sent["run_id"], "succeeded")
    assert run.reply == "Here after the outage."
    # Kept once, answered once.
    assert list(AgentMessage.objects.filter(chat_id=run.chat_id).values_list("role", "content")) == [
        ("user", "Are you there?"), ("assistant", "Here after the outage."),
    ]


async def until_events_arrive_again(socket: WebsocketCommunicator, owner_id: int) -> None:
    """Until an event published now reaches the socket, which its subscription, come back through the proxy,
    shows. The worker's reply is published on the worker's own way to Redis, which never failed: nothing
    owes the socket a resync for it, and a reply published before the subscription was back (a sweep may
    queue the run at once) would be lost on the way to this test."""
    probe = {"type": "assistant.step", "run_id": 0, "chat_id": 0, "step": {"seq": 0}}
    stop = threading.Event()

    def keep_publishing() -> None:
        while not stop.is_set():
            publisher.publish(user_group(owner_id), probe)
            publisher.flush(5.0)
            stop.wait(0.2)

    publishing = threading.Thread(target=keep_publishing, daemon=True)
    publishing.start()
    try:
        await receive_until(socket, lambda event: event["type"] == "assistant.step", timeout=30)
    finally:
        stop.set()
        publishing.join()


def _make_overdue(run_id: int) -> None:
    """As if the sweeper's grace period had passed since the run was queued (rather than waiting it out)."""
    overdue = timezone.now() - timedelta(seconds=float(assistant_settings.QUEUED_GRACE_SECONDS) + 5)
    AgentRun.objects.filter(pk=run_id, status=AgentRun.Status.QUEUED).update(created_at=overdue)


def test_events_lost_while_redis_is_unreachable_are_followed_by_a_resync(
    alice: Any, outage: CuttableProxy
) -> None:
    socket = connect(alice)
    step = {"type": "assistant.step", "run_id": 1, "chat_id": 1, "step": {"seq": 1}}

    async def scenario() -> list[dict[str, Any]]:
        assert (await socket.connect())[0]
        outage.cut()
        # Published as a worker publishes; the layer cannot reach Redis, so the event is lost.
        await asyncio.to_thread(publisher.publish, user_group(alice.pk), step)
        assert await asyncio.to_thread(publisher.flush, 30.0)
        outage.restore()
        # Whatever reaches the socket before the resync is collected with it: the step, had it come through
        # (then or once Redis is back), would be among what is checked below.
        received = await receive_until(socket, lambda event: event["type"] == "assistant.resync", timeout=20)
        # It is said once more a moment later, for sockets whose own subscription came back late (this one
        # may have missed the first). Waiting for it with a receive timeout would cancel the consumer (the
        # test communicator's way with a timeout), so the repeat is collected on the way to a pong.
        await asyncio.sleep(RESYNC_SETTLE_SECONDS + 1.0)
        await socket.send_json_to({"type": "assistant.ping", "id": "after"})
        *repeated, answer = await receive_until(socket, lambda event: event["type"] == "assistant.pong")
        assert answer == {"type": "assistant.pong", "id": "after"}
        await socket.disconnect()
        return received + repeated

    received = asyncio.run(scenario())
    assert all(unnumbered(event) == {"type": "assistant.resync", "reason": "lost"} for event in received)


@pytest.mark.worker
def test_an_edit_sent_while_redis_is_unreachable_is_told_to_its_sender_with_its_branch_and_files(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, outage: CuttableProxy
) -> None:
    fake_openai.queue(openai_stream(["Two tasks."]))
    uploader = Client()
    uploader.force_login(alice)
    csv = uploader.post(reverse("assistant:attachments"), {"file": SimpleUploadedFile(
        "tasks.csv", b"title\nBuy milk\nFix the fence\n", content_type="text/csv")}).json()["attachment"]
    socket = connect(alice)

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        assert (await socket.connect())[0]
        await socket.send_json_to({"type": "assistant.send", "content": "what is in this?", "attachments": [csv["id"]]})
        first = (await receive_until(socket, lambda event: event["type"] == "assistant.replied", timeout=30))[0]
        outage.cut()
        await socket.send_json_to({"type": "assistant.send", "content": "how many?", "edit_of": first["message"]["id"],
                                   "attachments": [csv["id"]], "request_id": "e1"})
        during = await receive_until(socket, lambda event: event["type"] == "assistant.error")
        outage.restore()
        await socket.disconnect()
        return first, during

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        first, (sent, error) = asyncio.run(scenario())

    assert (sent["type"], error["code"]) == ("assistant.sent", "unavailable")
    # As every tab would have been told: the new version's place beside the first, and its file.
    assert sent["message"]["parent_id"] == first["message"]["parent_id"]
    assert sent["message"]["branch"]["count"] == 2
    [file] = sent["message"]["attachments"]
    assert file["name"] == "tasks.csv" and file["id"] != csv["id"]
