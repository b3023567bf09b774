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

Nothing a model or a person writes may make an event vanish. Every event is first brought within
bounds (`bounded`: depth, integers, floats, Unicode, string lengths) and packed on its own, so one odd
value cannot take its batch down with it; an event still too large to publish is replaced by
`assistant.resync`. When a publish fails anyway (Redis out of reach), the person's sockets are sent
`assistant.resync` as soon as Redis answers again: the client then reloads the chat (`assistant.load`),
which the database answers in full.

What Redis took and then lost (a subscriber's connection dropped, a full buffer) is seen by the client:
every batch for a person takes the next numbers of that person's count (`event_seq`, an INCRBY on a key
shared by every web and worker process, its expiry refreshed on use; the batches of everyone waiting are
numbered in one round trip), just before it is sent. A
number is taken after the event's rows committed, so a load read after seeing number N shows everything
up to N; `assistant.load` answers with the count as of its read (`current_event_seq`), where a client's
count starts. A client that sees a number missing for a moment reloads (docs/protocol.md, "Event
numbers"). When the count cannot be reached the batch still goes, unnumbered, and the person is owed an
`assistant.resync` like after a failed publish.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import os
import threading
from typing import Any

import msgpack
import redis
import redis.asyncio
from channels.layers import get_channel_layer
from django.db import transaction

from assistant.conf import assistant_redis_url
from assistant.infra import event_names
from assistant.infra.redis_connection import redis_client

logger = logging.getLogger(__name__)

# The bounds every event keeps (see `bounded`).
MAX_EVENT_DEPTH = 32
MAX_EVENT_STRING_CHARS = 20_000
MAX_EVENT_BYTES = 1_000_000
# Beyond this a browser's JSON.parse rounds an integer: such numbers travel as strings of digits, so an
# approval card shows exactly the number that will be used.
MAX_SAFE_INTEGER = 2**53 - 1
TOO_DEEP = "…"
# After a failed publish, `assistant.resync` is retried with backoff for this long.
RESYNC_RETRY_SECONDS = 0.5
RESYNC_RETRY_MAX_SECONDS = 5.0
RESYNC_GIVE_UP_SECONDS = 600.0
RESYNC_SETTLE_SECONDS = 2.0

COALESCE_SECONDS = 0.015
URGENT_EVENTS = frozenset({
    event_names.SENT, event_names.CONFIRM, event_names.REPLIED, event_names.REPLY_FAILED, event_names.CANCELLED,
})

# The person's count of events (`event_seq`): a key per person, forgotten after a day without events.
EVENT_SEQ_TTL_SECONDS = 86_400
# Taking numbers must not hold the stream up for long when that Redis hangs.
EVENT_SEQ_TIMEOUT_SECONDS = 1.0
_USER_GROUP_PREFIX = "assistant.user."

Queued = tuple[str, dict[str, Any], float]  # group, event, when it was published (loop time)


def user_group(user_id: int) -> str:
    """Every socket of one person joins this group; events carry chat and run ids for the client to route."""
    return f"{_USER_GROUP_PREFIX}{user_id}"


def event_seq_key(user_id: int | str) -> str:
    """The Redis key of a person's count of events."""
    return f"assistant:event_seq:{user_id}"


def _event_seq_key_of(group: str) -> str | None:
    """The count the events of `group` are numbered by: a person's group has one, other groups none."""
    return event_seq_key(group[len(_USER_GROUP_PREFIX):]) if group.startswith(_USER_GROUP_PREFIX) else None


def current_event_seq(user_id: int) -> int | None:
    """The person's count now (0 before their first event, or after a day without any), or None when
    Redis cannot say. Read before a load reads the database, every event up to it is in that read."""
    try:
        value = redis_client().get(event_seq_key(user_id))
    except redis.exceptions.RedisError:
        logger.warning("Could not read the event count of user %s", user_id, exc_info=True)
        return None
    return int(value) if value is not None else 0


def resync_event(reason: str, **route: Any) -> dict[str, Any]:
    """Tells the client that events were lost (`reason` "lost") or withheld ("too_large"): reload with
    `assistant.load`. `route` may name the run and chat the withheld event was about."""
    return {"type": event_names.RESYNC, "reason": reason, **route}


def bounded(value: Any, _depth: int = 0) -> Any:
    """`value` as JSON that any channel layer packs and any browser reads exactly: containers nested past
    MAX_EVENT_DEPTH become "…", integers beyond ±MAX_SAFE_INTEGER strings of digits, non-finite floats
    their name ("nan", "inf"), lone surrogates U+FFFD, strings past MAX_EVENT_STRING_CHARS cut with a
    note, keys strings, and anything else its text. Values already within bounds come back unchanged."""
    kind = type(value)  # exact types first: this runs on every value of every event
    if kind is str:
        return _bounded_text(value)
    if kind is dict:
        if _depth >= MAX_EVENT_DEPTH:
            return TOO_DEEP
        return {_bounded_text(key if type(key) is str else str(key)): bounded(item, _depth + 1)
                for key, item in value.items()}
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        try:
            return str(value)
        except ValueError:  # past Python's digit limit for int -> str
            return "(an integer too long to show)"
    if value is None or kind is bool:
        return value
    if kind is list or kind is tuple:
        if _depth >= MAX_EVENT_DEPTH:
            return TOO_DEEP
        return [bounded(item, _depth + 1) for item in value]
    if kind is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bool | int | float | str | dict | list | tuple):  # subclasses: as their base type
        base: type[Any] = next(t for t in (bool, int, float, str, dict, list, tuple) if isinstance(value, t))
        return bounded(base(value), _depth)
    return _bounded_text(str(value))


def _bounded_text(text: str) -> str:
    if text.isascii() and len(text) <= MAX_EVENT_STRING_CHARS:
        return text
    if len(text) > MAX_EVENT_STRING_CHARS:
        text = f"{text[:MAX_EVENT_STRING_CHARS]}… ({len(text) - MAX_EVENT_STRING_CHARS} more characters)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogate pairs become the character they stand for; a lone surrogate becomes U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def publishable(event: dict[str, Any]) -> dict[str, Any]:
    """The event within bounds, or, if even that is over MAX_EVENT_BYTES packed, `assistant.resync` naming
    its run and chat (the client reloads the state from the database instead)."""
    event = bounded(event)
    try:
        size = len(msgpack.packb(event))
    except (TypeError, ValueError, OverflowError):  # not expected after bounding; never lose the event silently
        logger.exception("Event %s could not be packed", event.get("type"))
        size = MAX_EVENT_BYTES + 1
    if size <= MAX_EVENT_BYTES:
        return event
    logger.warning("Event %s is %s bytes packed; sending assistant.resync instead", event.get("type"), size)
    route = {key: event[key] for key in ("run_id", "chat_id") if key in event}
    return resync_event("too_large", **route)


class Publisher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Queued | threading.Event] | None = None
        self._urgent: asyncio.Event | None = None
        # Published but not yet on the loop's queue: filled by any thread, emptied by the loop in one
        # callback. One wake-up of the loop per burst, not one per event (a reply's token deltas, a run's
        # steps): each wake-up is a write to the loop's pipe and a fight for the interpreter.
        self._incoming: collections.deque[tuple[tuple[str, dict[str, Any]] | threading.Event, bool]] = (
            collections.deque())
        self._wake_pending = False
        # Groups whose events were lost and not yet told so (touched on the publishing loop only).
        self._lost: set[str] = set()
        # The publishing loop's client for the count, by Redis URL (created on that loop).
        self._counters: dict[str, redis.asyncio.Redis] = {}

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        # A forked Celery pool process inherits the object but not the thread: start one per process.
        with self._lock:
            if self._pid != os.getpid() or self._loop is None:
                self._counters = {}  # a parent's connections belong to its loop
                self._incoming, self._wake_pending = collections.deque(), False
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
            batches = self._batches(queue, item)
            for group, events in batches.items():
                if group in self._lost:
                    events.insert(0, resync_event("lost"))
            numbered = await self._number(batches)
            # Each person's batch is one group_send; different people's leave side by side.
            await asyncio.gather(*(self._send(group, events, numbered=group in numbered)
                                   for group, events in batches.items()))

    @staticmethod
    def _batches(queue: asyncio.Queue[Queued | threading.Event], first: Queued) -> dict[str, list[dict[str, Any]]]:
        """`first` and every event already waiting behind it, up to a flush marker, by person in order,
        each brought within bounds, and adjacent token deltas of the same run merged. Many people's steps
        then share one trip to Redis for their numbers instead of two trips each."""
        batches: dict[str, list[dict[str, Any]]] = {first[0]: [first[1]]}
        waiting = queue._queue  # type: ignore[attr-defined]
        while waiting and isinstance(waiting[0], tuple):
            group, event, _ = queue.get_nowait()  # type: ignore[misc]
            events = batches.setdefault(group, [])
            last = events[-1] if events else None
            if (last is not None and event.get("type") == last.get("type") == event_names.TEXT_DELTA
                    and event.get("run_id") == last.get("run_id")):
                events[-1] = {**last, "delta": last["delta"] + event["delta"]}
            else:
                events.append(event)
        return {group: [publishable(event) for event in events] for group, events in batches.items()}

    async def _number(self, batches: dict[str, list[dict[str, Any]]]) -> set[str]:
        """Give each batch's events the next numbers of its person's count (`event_seq`), all in one round
        trip; returns the groups numbered (or with no count to keep). None are when the count could not be
        reached: the events then go without numbers."""
        counted = {group: key for group in batches if (key := _event_seq_key_of(group)) is not None}
        if not counted:
            return set(batches)
        try:
            url = assistant_redis_url()
            client = self._counters.get(url)
            if client is None:
                client = self._counters[url] = redis.asyncio.Redis.from_url(
                    url, socket_timeout=EVENT_SEQ_TIMEOUT_SECONDS, socket_connect_timeout=EVENT_SEQ_TIMEOUT_SECONDS)
            async with client.pipeline(transaction=False) as pipe:
                for group, key in counted.items():
                    pipe.incrby(key, len(batches[group]))
                    pipe.expire(key, EVENT_SEQ_TTL_SECONDS)
                replies = await pipe.execute()
        except Exception as exc:  # the events still go; the person is told to reload (see `_send`)
            logger.warning("Could not number the events of %s people: %s", len(counted), exc)
            return set(batches) - set(counted)
        for group, last in zip(counted, replies[::2], strict=True):
            events = batches[group]
            for number, event in enumerate(events, start=int(last) - len(events) + 1):
                event["event_seq"] = number
        return set(batches)

    async def _send(self, group: str, events: list[dict[str, Any]], *, numbered: bool) -> bool:
        """One group_send; on failure the group is owed an `assistant.resync`, and so it is when the events
        went without numbers (a loss among them would not show). The layer is looked up each time, so a
        changed CHANNEL_LAYERS setting (or a layer reset) takes effect."""
        only_resync = all(event.get("type") == event_names.RESYNC for event in events)
        try:
            await get_channel_layer().group_send(group, {"type": event_names.LAYER_BATCH, "events": events})
        except Exception:  # the database holds the truth; the client is told to reload it
            logger.exception("Could not publish %s to %s", [event.get("type") for event in events], group)
            if group not in self._lost:
                self._lost.add(group)
                asyncio.ensure_future(self._announce_loss(group))
            return False
        if numbered or only_resync:
            self._lost.discard(group)
        elif group not in self._lost:
            self._lost.add(group)
            asyncio.ensure_future(self._announce_loss(group))
        return True

    async def _announce_loss(self, group: str) -> None:
        """Retry `assistant.resync` alone until it goes out (or a later batch took it along), with backoff;
        then say it once more, RESYNC_SETTLE_SECONDS later: a socket whose own subscription broke in the same
        outage subscribes again a moment after Redis is back (the layer retries each second), and a
        Pub/Sub message sent before that never reaches it."""
        loop = asyncio.get_running_loop()
        give_up, delay = loop.time() + RESYNC_GIVE_UP_SECONDS, RESYNC_RETRY_SECONDS
        while group in self._lost:
            if loop.time() > give_up:
                self._lost.discard(group)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESYNC_RETRY_MAX_SECONDS)
            if group not in self._lost:
                break
            try:
                notice = [resync_event("lost")]
                await self._number({group: notice})
                await get_channel_layer().group_send(group, {"type": event_names.LAYER_BATCH, "events": notice})
            except Exception as exc:  # still out of reach: the first failure was logged in full
                logger.debug("assistant.resync to %s not sent yet: %s", group, exc)
                continue
            self._lost.discard(group)
        await asyncio.sleep(RESYNC_SETTLE_SECONDS)
        notice = [resync_event("lost")]
        await self._send(group, notice, numbered=bool(await self._number({group: notice})))

    def publish(self, group: str, event: dict[str, Any]) -> None:
        self._hand_over((group, event), event.get("type") in URGENT_EVENTS)

    def _hand_over(self, item: tuple[str, dict[str, Any]] | threading.Event, urgent: bool) -> None:
        """Put `item` on the loop's queue, in order with everything published before it, from any thread."""
        loop = self._ensure_started()
        with self._lock:
            self._incoming.append((item, urgent))
            if self._wake_pending:
                return
            self._wake_pending = True
        loop.call_soon_threadsafe(self._take_incoming)

    def _take_incoming(self) -> None:
        # Runs on the publishing loop.
        assert self._queue is not None and self._urgent is not None and self._loop is not None
        with self._lock:
            incoming, self._incoming, self._wake_pending = self._incoming, collections.deque(), False
        now = self._loop.time()
        for item, urgent in incoming:
            self._queue.put_nowait(item if isinstance(item, threading.Event) else (*item, now))
            if urgent:
                self._urgent.set()

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until everything published so far has been handed to the layer."""
        if self._loop is None or self._pid != os.getpid():
            return True
        done = threading.Event()
        self._hand_over(done, True)
        return done.wait(timeout)


publisher = Publisher()


#: The mark of an event nobody is told of: a run of a channel its person never sees (an eval's replay), staff's alone.
QUIET = "_quiet"


def publish_to_user(user_id: int, event: dict[str, Any]) -> None:
    """Publish once the current transaction commits (at once outside one): never announce a row that
    could still roll back. An event marked QUIET is not published."""
    if event.get(QUIET):
        return
    transaction.on_commit(lambda: publisher.publish(user_group(user_id), event))
