"""The assistant's socket as a test opens it: a signed-in person's WebsocketCommunicator, reading its
events until the one a test waits for, and until everything sent its way has arrived (`settle`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from channels.testing import WebsocketCommunicator
from django.test import Client

from assistant.live.events import publisher, user_group
from config.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
SETTLED = "test.settled"
_marks = itertools.count(1)


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


async def settle(*tabs: tuple[WebsocketCommunicator, Any], timeout: float = 20) -> list[list[dict[str, Any]]]:
    """What each `(socket, its person)` received before a positive sign that everything already sent its
    way has arrived; a test asserts on it, usually that it is empty ("nothing else came").

    The sign has two parts, for what can still be on its way. A ping on every socket, answered by its
    pong: a consumer handles one message at a time, so every frame sent before has been handled (its rows
    committed, its events published). Then a marker published to each person's group through the same
    publisher the consumers use: it leaves after every event published in this process before it, so once
    it arrives, they have too. Events published by another process (the worker) are covered only when
    they were published before something the test has already seen from that process (such as the run's
    last event); waiting a fixed time instead would pass without checking anything on a slow machine.

    Every socket of these people gets the marker: pass them all, or the others still hold it.
    """
    before: list[list[dict[str, Any]]] = []
    for socket, _ in tabs:
        ping = f"settle-{next(_marks)}"
        await socket.send_json_to({"type": "assistant.ping", "id": ping})
        *events, _ = await receive_until(
            socket, lambda event, ping=ping: event == {"type": "assistant.pong", "id": ping}, timeout)
        before.append(events)
    marks = {}
    for user in {user.pk: user for _, user in tabs}.values():
        marks[user.pk] = mark = f"settle-{next(_marks)}"
        publisher.publish(user_group(user.pk), {"type": SETTLED, "mark": mark})
    for (socket, user), events in zip(tabs, before, strict=True):
        *rest, _ = await receive_until(
            socket, lambda event, mark=marks[user.pk]: event.get("type") == SETTLED and event.get("mark") == mark,
            timeout)
        events.extend(rest)
    return before
