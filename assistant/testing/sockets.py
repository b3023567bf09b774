"""The assistant's socket as a test opens it: a signed-in person's WebsocketCommunicator on the host's own
`settings.ASGI_APPLICATION`, reading its events until the one a test waits for, and until everything sent
its way has arrived (`settle`).

The socket runs in the test's process, but a run's turns are taken by the Celery worker: a test that sends
a message needs a worker on the test database (a `celery -A <project> worker` process started with the
test database's settings, such as `assistant.testing.worker.WorkerProcess`) for the reply to come.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.utils.module_loading import import_string

from assistant.infra import event_names
from assistant.live.events import publisher, user_group

#: Where `with_assistant` serves the assistant's socket.
SOCKET_PATH = "/ws/assistant/"
#: The host Django's test client names: its test environment adds it to ALLOWED_HOSTS, which the socket's
#: Origin check accepts.
ORIGIN = (b"origin", b"http://testserver")
#: The type of the marker event `settle` publishes; a test that publishes its own may reuse it.
SETTLED = "test.settled"
#: The events after which a run says nothing more to the person: it answered, failed or was stopped.
REPLY_ENDED = frozenset({event_names.REPLIED, event_names.REPLY_FAILED, event_names.CANCELLED})
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


def host_application() -> Any:
    """The host's ASGI application, `settings.ASGI_APPLICATION` (what its asgi.py made with `with_assistant`).

    Imported when a test first asks, not when this module is: by then the test environment has added
    its host to ALLOWED_HOSTS, which the socket's Origin check reads once, when the application is made.
    """
    return import_string(settings.ASGI_APPLICATION)


def session_cookie(client: Client) -> tuple[bytes, bytes]:
    """The Cookie header of `client`'s session, as a socket of that browser would send it."""
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode())


def connect(user: Any, **session_data: Any) -> WebsocketCommunicator:
    """A socket of a fresh browser session in which `user` signed in (see `signed_in_client`); `await
    socket.connect()` opens it. The sign-in writes the session to the database, so this is called before
    the test's event loop runs (or through `sync_to_async`)."""
    client = signed_in_client(user, **session_data)
    return WebsocketCommunicator(host_application(), SOCKET_PATH, headers=[ORIGIN, session_cookie(client)])


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
        *events, _ = await receive_until(socket, _is_pong_to(ping), timeout)
        before.append(events)
    marks = {}
    for user in {user.pk: user for _, user in tabs}.values():
        marks[user.pk] = mark = f"settle-{next(_marks)}"
        publisher.publish(user_group(user.pk), {"type": SETTLED, "mark": mark})
    for (socket, user), events in zip(tabs, before, strict=True):
        *rest, _ = await receive_until(socket, _is_marker(marks[user.pk]), timeout)
        events.extend(rest)
    return before


def _is_pong_to(ping: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event == {"type": "assistant.pong", "id": ping}


def _is_marker(mark: str) -> Callable[[dict[str, Any]], bool]:
    return lambda event: event.get("type") == SETTLED and event.get("mark") == mark
