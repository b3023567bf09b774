"""The live channel accepts only a signed-in user from an allowed origin."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/ws/assistant/"
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def run(coroutine_function: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coroutine_function())


def session_cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def test_anonymous_connection_is_rejected() -> None:
    async def scenario() -> None:
        communicator = WebsocketCommunicator(application, PATH, headers=[ORIGIN])
        connected, code = await communicator.connect()
        assert not connected
        assert code == 4401
        await communicator.disconnect()

    run(scenario)


def test_foreign_origin_is_rejected_even_when_logged_in(alice: Any) -> None:
    cookie = session_cookie(alice)

    async def scenario() -> None:
        communicator = WebsocketCommunicator(
            application, PATH, headers=[(b"origin", b"https://evil.example"), cookie]
        )
        connected, _ = await communicator.connect()
        assert not connected
        await communicator.disconnect()

    run(scenario)


def test_logged_in_user_is_accepted_and_answers_ping(alice: Any) -> None:
    cookie = session_cookie(alice)

    async def scenario() -> None:
        communicator = WebsocketCommunicator(application, PATH, headers=[ORIGIN, cookie])
        connected, _ = await communicator.connect()
        assert connected
        await communicator.send_json_to({"type": "assistant.ping", "id": "p1"})
        assert await communicator.receive_json_from(timeout=5) == {"type": "assistant.pong", "id": "p1"}
        await communicator.disconnect()

    run(scenario)


def test_bad_frames_get_an_error_and_the_socket_stays_usable(alice: Any) -> None:
    cookie = session_cookie(alice)

    async def scenario() -> None:
        communicator = WebsocketCommunicator(application, PATH, headers=[ORIGIN, cookie])
        connected, _ = await communicator.connect()
        assert connected
        for frame in ["not json", "[1, 2]", '{"no": "type"}', "x" * 70_000]:
            await communicator.send_to(text_data=frame)
            reply = await communicator.receive_json_from(timeout=5)
            assert reply["type"] == "assistant.error", frame[:20]
        await communicator.send_json_to({"type": "assistant.nonsense"})
        assert (await communicator.receive_json_from(timeout=5))["code"] == "unknown_type"
        await communicator.send_json_to({"type": "assistant.ping", "id": 2})
        assert (await communicator.receive_json_from(timeout=5))["type"] == "assistant.pong"
        await communicator.disconnect()

    run(scenario)
