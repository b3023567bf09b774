"""Cancels pushed to the workers, so a turn learns of one without asking Redis at every step boundary.

`run_cancel` sets the row's flag (the truth), the Redis key (for anyone who asks) and then announces
the run id on one Pub/Sub channel. Each worker process keeps one subscription to it in a daemon thread
and sets the event of the run it is working on. A turn asks Redis for the key once, after its event is
registered and while the subscription is up; from then on a cancel reaches it as a message. Whenever the
subscription is down or was re-made (messages in between are lost: Pub/Sub is at most once), the turn
asks Redis again, at every boundary, as before; the lease heartbeat's database check stays the backstop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

CHANNEL = "assistant:cancels"
RECONNECT_SECONDS = 1.0


@cache
def _client() -> redis.Redis:
    return redis.Redis.from_url(str(settings.REDIS_URL), socket_timeout=2, socket_connect_timeout=2)


def announce_cancel(run_id: int) -> None:
    """Tell the workers; a lost announcement only means the worker notices at its next Redis check."""
    try:
        _client().publish(CHANNEL, str(run_id))
    except redis.RedisError:
        logger.warning("Could not announce the cancel of run %s; the worker sees it by asking", run_id)


@dataclass(frozen=True)
class Watch:
    """`event` is set when a cancel of the run is announced. `generation` is the subscription that was
    up once the event was registered (None: none was): every announcement made later under it reaches
    the event."""

    event: threading.Event
    generation: int | None


class CancelWatch:
    """One subscription per process; `generation` counts (re)subscriptions and is None while down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._events: dict[int, threading.Event] = {}
        self._generation: int | None = None
        self._subscriptions = 0

    @property
    def generation(self) -> int | None:
        return self._generation

    @contextlib.contextmanager
    def watching(self, run_id: int) -> Iterator[Watch]:
        """Catch announced cancels of `run_id` while inside; see `Watch`."""
        self._ensure_started()
        event = threading.Event()
        with self._lock:
            self._events[run_id] = event
        try:
            yield Watch(event=event, generation=self._generation)
        finally:
            with self._lock:
                self._events.pop(run_id, None)

    def _ensure_started(self) -> None:
        # A forked Celery pool process inherits the object but not the thread: start one per process.
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid, self._generation, self._events = os.getpid(), None, {}
            threading.Thread(target=self._listen, name="assistant-cancels", daemon=True).start()

    def _listen(self) -> None:
        stop = threading.Event()  # never set: the thread lives as long as its process
        while True:
            pubsub = None
            try:
                # No read timeout: the connection idles until a cancel arrives.
                pubsub = redis.Redis.from_url(str(settings.REDIS_URL), socket_connect_timeout=2).pubsub()
                pubsub.subscribe(CHANNEL)
                for message in pubsub.listen():
                    if message["type"] == "subscribe":
                        self._subscriptions += 1
                        self._generation = self._subscriptions
                    elif message["type"] == "message":
                        self._deliver(message["data"])
            except Exception:  # Redis down or restarted: turns ask Redis themselves until re-subscribed
                logger.warning("Cancel subscription lost; retrying in %s s", RECONNECT_SECONDS, exc_info=True)
            finally:
                self._generation = None
                if pubsub is not None:
                    with contextlib.suppress(Exception):  # already broken; a new one is made next
                        pubsub.close()
            stop.wait(RECONNECT_SECONDS)

    def _deliver(self, data: bytes) -> None:
        try:
            run_id = int(data)
        except ValueError:
            return
        with self._lock:
            event = self._events.get(run_id)
        if event is not None:
            event.set()


watcher = CancelWatch()
