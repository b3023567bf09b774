"""Live events: rows first, then an event on the channel layer to the owner's sockets.

Events are published from one long-lived asyncio loop per process (a daemon thread), fed through a
queue so they leave in the order they were published. A fresh event loop per `group_send` would cost
several milliseconds each — too much for a stream of token deltas. Events for the same person that
pile up leave together in one `group_send` (a batch the consumer unpacks in order), and consecutive
token deltas of the same run in such a batch are merged into one event.

Steps and token deltas wait up to `COALESCE_SECONDS` for company; what a person waits on (their own
message echoed, a question to approve, the reply, a failure or a stop) leaves at once, taking whatever
waits before it along. Each wake-up of the publishing thread competes with the thread doing the work
for the interpreter: measured on 2 cores, publishing a three-tool turn's steps one by one cost the turn
about 7 ms; a few batches cost a fraction of that, and 15 ms is below what a person can see.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

COALESCE_SECONDS = 0.015
URGENT_EVENTS = frozenset({
    "assistant.sent", "assistant.confirm", "assistant.replied", "assistant.reply_failed", "assistant.cancelled",
})

Queued = tuple[str, dict[str, Any], float]  # group, event, when it was published (loop time)


def user_group(user_id: int) -> str:
    """Every socket of one person joins this group; events carry chat and run ids for the client to route."""
    return f"assistant.user.{user_id}"


class Publisher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Queued | threading.Event] | None = None
        self._urgent: asyncio.Event | None = None

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
        self._queue, self._urgent = asyncio.Queue(), asyncio.Event()
        ready.set()
        loop.run_until_complete(self._drain(self._queue))

    async def _drain(self, queue: asyncio.Queue[Queued | threading.Event]) -> None:
        layer = get_channel_layer()
        urgent = self._urgent
        assert urgent is not None
        loop = asyncio.get_running_loop()
        while True:
            item = await queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            # Wait for company until this event's time is up or something urgent arrives (or is this one).
            wait = item[2] + COALESCE_SECONDS - loop.time()
            if wait > 0 and item[1].get("type") not in URGENT_EVENTS and not urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(urgent.wait(), wait)
            urgent.clear()
            group, events = item[0], self._batch(queue, item[0], [item[1]])
            try:
                await layer.group_send(group, {"type": "assistant.events", "events": events})
            except Exception:  # the database holds the truth; a lost event is refetched by the client
                logger.exception("Could not publish %s to %s", [event.get("type") for event in events], group)

    @staticmethod
    def _batch(
        queue: asyncio.Queue[Queued | threading.Event], group: str, events: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Take what is already waiting for the same group, in order, merging adjacent token deltas."""
        waiting = queue._queue  # type: ignore[attr-defined]
        while waiting and isinstance(waiting[0], tuple) and waiting[0][0] == group:
            event = queue.get_nowait()[1]  # type: ignore[index]
            last = events[-1]
            if (event.get("type") == last.get("type") == "assistant.token"
                    and event.get("run_id") == last.get("run_id")):
                events[-1] = {**last, "delta": last["delta"] + event["delta"]}
            else:
                events.append(event)
        return events

    def publish(self, group: str, event: dict[str, Any]) -> None:
        loop = self._ensure_started()
        loop.call_soon_threadsafe(self._put, (group, event), event.get("type") in URGENT_EVENTS)

    def _put(self, item: tuple[str, dict[str, Any]] | threading.Event, urgent: bool) -> None:
        # Runs on the publishing loop.
        assert self._queue is not None and self._urgent is not None and self._loop is not None
        self._queue.put_nowait(item if isinstance(item, threading.Event) else (*item, self._loop.time()))
        if urgent:
            self._urgent.set()

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until everything published so far has been handed to the layer."""
        if self._loop is None or self._pid != os.getpid():
            return True
        done = threading.Event()
        self._loop.call_soon_threadsafe(self._put, done, True)
        return done.wait(timeout)


publisher = Publisher()


def publish_to_user(user_id: int, event: dict[str, Any]) -> None:
    """Publish once the current transaction commits (at once outside one): never announce a row that
    could still roll back."""
    transaction.on_commit(lambda: publisher.publish(user_group(user_id), event))
