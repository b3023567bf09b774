"""Live events: rows first, then an event on the channel layer to the owner's sockets.

Events are published from one long-lived asyncio loop per process (a daemon thread), fed through a
queue so they leave in the order they were published. A fresh event loop per `group_send` would cost
several milliseconds each — too much for a stream of token deltas. Consecutive token deltas of the same
run that pile up while the layer is busy are merged into one event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def user_group(user_id: int) -> str:
    """Every socket of one person joins this group; events carry chat and run ids for the client to route."""
    return f"assistant.user.{user_id}"


class Publisher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]] | threading.Event] | None = None

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        # A forked Celery pool process inherits the object but not the thread: start one per process.
        with self._lock:
            if self._pid != os.getpid() or self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()
                self._loop, self._pid = loop, os.getpid()
                thread = threading.Thread(target=self._run, args=(loop, ready), name="assistant-events", daemon=True)
                thread.start()
                ready.wait()
            return self._loop

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        self._queue = asyncio.Queue()
        ready.set()
        loop.run_until_complete(self._drain(self._queue))

    async def _drain(self, queue: asyncio.Queue[tuple[str, dict[str, Any]] | threading.Event]) -> None:
        layer = get_channel_layer()
        while True:
            item = await queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            group, event = item
            if event.get("type") == "assistant.token":
                event = self._merge_tokens(queue, event)
            try:
                await layer.group_send(group, {"type": "assistant.event", "event": event})
            except Exception:  # the database holds the truth; a lost event is refetched by the client
                logger.exception("Could not publish %s to %s", event.get("type"), group)

    @staticmethod
    def _merge_tokens(
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | threading.Event], event: dict[str, Any]
    ) -> dict[str, Any]:
        deltas = [event["delta"]]
        # Only look at what is already waiting; never reorder around other events.
        while not queue.empty():
            following = queue._queue[0]  # type: ignore[attr-defined]
            if (
                isinstance(following, tuple)
                and following[1].get("type") == "assistant.token"
                and following[1].get("run_id") == event.get("run_id")
            ):
                queue.get_nowait()
                deltas.append(following[1]["delta"])
            else:
                break
        return {**event, "delta": "".join(deltas)} if len(deltas) > 1 else event

    def publish(self, group: str, event: dict[str, Any]) -> None:
        loop = self._ensure_started()
        assert self._queue is not None
        loop.call_soon_threadsafe(self._queue.put_nowait, (group, event))

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until everything published so far has been handed to the layer."""
        if self._loop is None or self._pid != os.getpid():
            return True
        done = threading.Event()
        assert self._queue is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, done)
        return done.wait(timeout)


publisher = Publisher()


def publish_to_user(user_id: int, event: dict[str, Any]) -> None:
    """Publish once the current transaction commits (at once outside one): never announce a row that
    could still roll back."""
    transaction.on_commit(lambda: publisher.publish(user_group(user_id), event))
