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


def signed_in_client(user: Any, **session_data: Any) -> Client:
    """A fresh browser session in which `user` signed in; it holds `session_data`, as the site's own pages
    would put it there."""
    client = Client()
    client.force_login(user)
    if session_data:
        session = client.session
        session.update(session_data)
        session.save()
    return client


def connect(user: Any, **session_data: Any) -> WebsocketCommunicator:
    """A socket of a fresh browser session in which `user` signed in (see `signed_in_client`)."""
    client = signed_in_client(user, **session_data)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    return WebsocketCommunicator(application, "/ws/assistant/", headers=[ORIGIN, cookie])


def unnumbered(event: dict[str, Any]) -> dict[str, Any]:
    """The event without its number in the person's count (`event_seq`), to compare what it says."""
    return {key: value for key, value in event.items() if key != "event_seq"}


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
