"""The watch over the sessions the panel's sockets were opened with: a session that ends without a signal
(it expired, was deleted, its password changed, its person was deactivated) closes every socket it signed in.

A signed-out session says so itself (the logout signal reaches the session's group); this watch is for the
rest, which only a look at the session store tells. It lives apart from the socket's consumer because it is
about the session, not the socket: the consumer adds itself when it opens and is told when to end.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Protocol

from channels.db import database_sync_to_async

from assistant.access.authority import SentFrom, session_acts_as
from assistant.conf import assistant_settings

logger = logging.getLogger(__name__)


class WatchedSocket(Protocol):
    """A socket the watch may end: the person it signs in, the session it came with, and how it ends."""

    user: Any
    sent_from: SentFrom

    # Private on the consumer: Channels routes a channel-layer message to any handler method its type names,
    # except a name with a leading underscore, so no message can end a session this way.
    async def _end_session(self) -> None: ...


class SessionWatch:
    """Re-checks the sessions of every socket of one event loop (a daphne process has one), together:
    each distinct session once per `SESSION_CHECK_SECONDS`, in one trip to a database thread. It notices
    what sends no signal — expiry, a deleted session, a changed password, a deactivated user.

    One watcher per socket cost an idle daphne a tenth of a core with 200 sockets open (two queries and a
    thread hop per socket every few seconds); a person's tabs share their session, and now its check."""

    def __init__(self) -> None:
        self.sockets: dict[tuple[str, Any], set[WatchedSocket]] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, consumer: WatchedSocket) -> None:
        self.sockets.setdefault((consumer.sent_from.session_key, consumer.user.pk), set()).add(consumer)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    def discard(self, consumer: WatchedSocket) -> None:
        sent_from, user = getattr(consumer, "sent_from", None), getattr(consumer, "user", None)
        if sent_from is None or user is None:
            return
        key = (sent_from.session_key, user.pk)
        sockets = self.sockets.get(key)
        if sockets is not None:
            sockets.discard(consumer)
            if not sockets:
                del self.sockets[key]

    async def _watch(self) -> None:
        while self.sockets:
            await asyncio.sleep(float(assistant_settings.SESSION_CHECK_SECONDS))
            watched = list(self.sockets)
            try:
                live = await database_sync_to_async(_sessions_live)(watched)
            except Exception:  # a database hiccup is not a logout: keep the sockets and look again later
                logger.warning("Could not re-check the sessions of %s sockets", len(watched), exc_info=True)
                continue
            for key in watched:
                if not live[key]:
                    for consumer in list(self.sockets.pop(key, ())):
                        asyncio.ensure_future(consumer._end_session())


def _sessions_live(keys: list[tuple[str, Any]]) -> dict[tuple[str, Any], bool]:
    return {key: session_acts_as(*key) for key in keys}


# One per event loop: a test's loop ends with the test, and a task of a closed loop never runs again.
_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionWatch] = weakref.WeakKeyDictionary()


def session_watch() -> SessionWatch:
    """The watch of the running event loop, made on first use."""
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = SessionWatch()
    return watch
