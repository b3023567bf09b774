"""The assistant's socket as a test opens it: a signed-in person's WebsocketCommunicator, and reading
its events until the one a test waits for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def connect(user: Any) -> WebsocketCommunicator:
    """A socket of a fresh browser session in which `user` signed in."""
    client = Client()
    client.force_login(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    return WebsocketCommunicator(application, "/ws/assistant/", headers=[ORIGIN, cookie])


async def receive_until(socket: WebsocketCommunicator, last: Callable[[dict[str, Any]], bool],
                        timeout: float = 20) -> list[dict[str, Any]]:
    """Every event up to and including the first for which `last` is true."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        event = await socket.receive_json_from(timeout=max(0.1, deadline - time.monotonic()))
        events.append(event)
        if last(event):
            return events
