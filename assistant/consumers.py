"""The live channel at /ws/assistant/: JSON events in both directions (see docs/protocol.md).

The consumer only parses frames and calls one service or selector per event; every id a client sends
is looked up among the person's own rows, so another person's id answers exactly like a missing one.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

import kombu.exceptions
import redis
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django import db
from django.db import transaction

from assistant.access.authority import SentFrom, SessionEnded, session_acts_as, session_ended_event, session_group
from assistant.conf import assistant_settings
from assistant.conversation import services
from assistant.conversation.frames import BadRequest, frame_flag, frame_id, frame_limit, frame_parse
from assistant.infra import event_names
from assistant.live import selectors
from assistant.live.events import bounded, current_event_seq, user_group
from assistant.live.payloads import chat_payload, message_payload, run_event, run_payload, step_payload
from assistant.page_context import BadPage, page_context, suggestions
from assistant.plans.record import plan_payload

logger = logging.getLogger(__name__)

# 4401 mirrors HTTP 401 in the private close-code range so clients can tell "log in" from a crash: no
# signed-in session at connect, or the session ended (logged out, expired, deactivated) while open.
CLOSE_UNAUTHENTICATED = 4401
# Pages of `assistant.load` (messages) and `assistant.chats` (chats): default and largest sizes.
LOAD_LIMIT_DEFAULT, LOAD_LIMIT_MAX = 50, 200
CHATS_LIMIT_DEFAULT, CHATS_LIMIT_MAX = 30, 100
# What it takes to reach Redis (the broker and the channel layer) or PostgreSQL, failing.
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    kombu.exceptions.OperationalError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    db.OperationalError, db.InterfaceError, ConnectionError,
)
UNAVAILABLE = "The assistant is briefly unavailable. In a moment, reload to see what was done."
UNAVAILABLE_SAVED = (
    "The assistant is briefly unavailable. Your message is saved and will be answered as soon as it is back."
)


class Unavailable(Exception):
    """Redis or the database could not be reached; `message` says what became of the request."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _chat_send(user: Any, *, content: str, chat_id: int | None, new_chat: bool, request_id: Any,
               sent_from: SentFrom | None, page: str | None = None) -> dict[str, Any] | None:
    """Store the message and its queued run, then start the run and announce it (services.chat_send).

    When the rows are stored but Redis refuses what follows the commit (starting the run, announcing
    it), returns the `assistant.sent` event for the sender's own socket: the message is kept, and the
    sweeper starts its queued run once Redis is back. Returns None when everything went out.
    """
    # A message is an instruction to act as the person: only while the session it comes with is live.
    # Checked here, in the same trip to the database thread as the send.
    if sent_from is not None and not session_acts_as(sent_from.session_key, user.pk):
        raise SessionEnded()
    sent = None
    try:
        with transaction.atomic():  # so that what runs on commit fails here, after `sent` is known
            sent = services.chat_send(user=user, content=content, chat_id=chat_id, new_chat=new_chat,
                                      request_id=request_id, sent_from=sent_from, page=page)
    except UNAVAILABLE_ERRORS:
        if sent is None:
            raise
        logger.warning("Run %s is stored but could not be started now; the sweeper will start it", sent.run.pk,
                       exc_info=True)
        return run_event(event_names.SENT, sent.run, chat=chat_payload(sent.chat, latest=sent.message),
                         message=message_payload(sent.message), run=run_payload(sent.run), request_id=request_id)
    return None


def _page_answer(user: Any, page: Any, chat_id: int | None, sent_from: SentFrom | None) -> dict[str, Any]:
    """`assistant.page_context`: what the assistant sees of `page` (null: nothing) and what it suggests
    there, under the spec of the chat `chat_id` (new chats' spec without it)."""
    try:
        seen = page_context(user, page, sent_from=sent_from) if page is not None else None
    except BadPage as exc:
        raise BadRequest("bad_page", str(exc)) from None
    chat = selectors.chat_get(user=user, chat_id=chat_id) if chat_id is not None else None
    spec = chat.spec if chat is not None else assistant_settings.SPEC
    offered = [suggestion.as_data() for suggestion in suggestions(user, spec, seen)]
    return {"type": event_names.PAGE_CONTEXT, "page": page,
            "about": {"text": seen.about, "kind": seen.kind, "id": seen.id} if seen is not None else None,
            "suggestions": offered}


def _chat_state(user: Any, chat_id: int | None, *, before: int | None = None, limit: int = LOAD_LIMIT_DEFAULT,
                with_steps: bool = False) -> dict[str, Any]:
    """`assistant.messages_loaded`: the chat (the current one without `chat_id`), the newest `limit`
    messages older than the message `before` (the newest overall without it), its active run and that
    run's steps and pending question; with `with_steps`, also the runs of the returned messages and
    their steps; and `event_seq`, the person's count of events read before the database, so every event
    numbered up to it is in the answer (where a client's count starts)."""
    event_seq = current_event_seq(user.pk)
    chat = selectors.chat_get(user=user, chat_id=chat_id) if chat_id is not None else selectors.chat_current(user=user)
    if chat is None:
        state: dict[str, Any] = {"type": event_names.MESSAGES_LOADED, "chat": None, "messages": [],
                                 "active_run": None, "steps": [], "members": [], "plan": None,
                                 "pending_confirmation": None,
                                 "has_more": False, "before": before, "event_seq": event_seq}
        if with_steps:
            state["runs"] = []
        return state
    page = selectors.chat_messages_page(chat=chat, before=before, limit=limit, with_steps=with_steps)
    run = selectors.chat_active_run(chat=chat)
    members = selectors.run_members(run=run) if run is not None else []
    pending = selectors.tree_pending_confirmation(run=run, members=members) if run is not None else None
    plans = selectors.runs_plans(run_ids=[r.pk for r in (run, *members)] if run is not None else [])
    # The newest page ends with the chat's newest message: no second look for the chat's preview.
    latest = {"latest": page.messages[-1] if page.messages else None} if before is None else {}
    state = {
        "type": event_names.MESSAGES_LOADED,
        "chat": chat_payload(chat, **latest),
        "messages": [message_payload(message) for message in page.messages],
        "has_more": page.has_more,
        "before": before,
        "active_run": run_payload(run) if run is not None else None,
        "steps": [step_payload(step) for step in selectors.run_steps(run=run)] if run is not None else [],
        # The members the active run asked, each with its steps (and plan): nested under the step that asked it.
        "members": [{**run_payload(member), "steps": [step_payload(step) for step in selectors.run_steps(run=member)],
                     "plan": _plan_or_none(plans.get(member.pk))} for member in members],
        # The plan the active run follows (its newest revision), if it made one.
        "plan": _plan_or_none(plans.get(run.pk)) if run is not None else None,
        "pending_confirmation": step_payload(pending) if pending is not None else None,
        "event_seq": event_seq,
    }
    if with_steps:
        past_plans = selectors.runs_plans(run_ids=[past.pk for past in page.runs])
        state["runs"] = [{**run_payload(past), "steps": [step_payload(step) for step in page.steps[past.pk]],
                          "plan": _plan_or_none(past_plans.get(past.pk))} for past in page.runs]
    return state


def _plan_or_none(plan: Any) -> dict[str, Any] | None:
    return plan_payload(plan) if plan is not None else None


def _chats_listed(user: Any, *, before: int | None, limit: int) -> dict[str, Any]:
    page = selectors.chats_list(user=user, before=before, limit=limit)
    return {
        "type": event_names.CHATS_LISTED,
        "chats": [chat_payload(chat, latest=page.latest.get(chat.pk)) for chat in page.chats],
        "has_more": page.has_more,
    }


class SessionWatch:
    """Re-checks the sessions of every socket of one event loop (a daphne process has one), together:
    each distinct session once per `SESSION_CHECK_SECONDS`, in one trip to a database thread. It notices
    what sends no signal — expiry, a deleted session, a changed password, a deactivated user.

    One watcher per socket cost an idle daphne a tenth of a core with 200 sockets open (two queries and a
    thread hop per socket every few seconds); a person's tabs share their session, and now its check."""

    def __init__(self) -> None:
        self.sockets: dict[tuple[str, Any], set[AssistantConsumer]] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, consumer: AssistantConsumer) -> None:
        self.sockets.setdefault((consumer.sent_from.session_key, consumer.user.pk), set()).add(consumer)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    def discard(self, consumer: AssistantConsumer) -> None:
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


def _session_watch() -> SessionWatch:
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = SessionWatch()
    return watch


class AssistantConsumer(AsyncJsonWebsocketConsumer):
    session_ended = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        sent_from = SentFrom.from_scope(self.scope)
        if user is None or not user.is_authenticated or sent_from is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user, self.sent_from = user, sent_from
        # The person's group carries their chats' events; the session's group, word that the session ended.
        self.groups_joined = [user_group(user.pk), session_group(sent_from.session_key)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        _session_watch().add(self)
        # Runs from the person's sessions that ended unobserved stop before this tab loads them.
        try:
            await database_sync_to_async(services.ended_sessions_runs_end)(user=user)
        except Exception:  # the next connect tries again; a worker refuses such a run's tool calls anyway
            logger.warning("Could not end the runs of a person's ended sessions", exc_info=True)

    async def disconnect(self, code: int) -> None:
        _session_watch().discard(self)
        await self._leave_groups()

    async def _leave_groups(self) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    # --- the session's life ------------------------------------------------------------------

    async def _end_session(self) -> None:
        """End the session's runs (its other sockets are told too), then say so and close with 4401."""
        try:
            await database_sync_to_async(services.session_runs_end)(session_key=self.sent_from.session_key)
        except Exception:  # the socket still closes; the runs' worker finds the session gone by itself
            logger.warning("Could not end the runs of an ended session", exc_info=True)
        await self._close_ended()

    async def _close_ended(self) -> None:
        if self.session_ended:
            return
        self.session_ended = True
        _session_watch().discard(self)
        await self._leave_groups()
        await self.send_json(session_ended_event())
        await self.close(code=CLOSE_UNAUTHENTICATED)

    # --- frames ------------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if self.session_ended:
            return
        if text_data is None:
            await self.send_error("bad_frame", "Frames must be JSON text.")
            return
        try:
            content = frame_parse(text_data)
        except BadRequest as exc:
            await self.send_error(exc.code, exc.message)
            return
        await self.receive_json(content)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        handlers = {
            event_names.PING: self.on_ping,
            event_names.SEND: self.on_send,
            event_names.CANCEL: self.on_cancel,
            event_names.CONFIRM: self.on_confirm,
            event_names.LOAD: self.on_load,
            event_names.FEEDBACK: self.on_feedback,
            event_names.CHATS: self.on_chats,
            event_names.CHAT_RENAME: self.on_chat_rename,
            event_names.CHAT_DELETE: self.on_chat_delete,
            event_names.PAGE: self.on_page,
        }
        handler = handlers.get(content["type"])
        request_id = content.get("request_id")
        if handler is None:
            await self.send_error("unknown_type", f"Unknown event type {content['type'][:100]!r}.", request_id)
            return
        try:
            await handler(content)
        except (BadRequest, services.Refused) as exc:
            await self.send_error(exc.code, exc.message, request_id)
        except selectors.NotFound as exc:
            # A load names a chat: a chat that is not the person's fails the thread. A paging cursor
            # that names nothing of theirs is an error like any other missing id.
            if content["type"] == event_names.LOAD and not isinstance(exc, selectors.CursorNotFound):
                await self.send_json({"type": event_names.THREAD_FAILED, "chat_id": content.get("chat_id"),
                                      "error": "That conversation does not exist.", "request_id": request_id})
            else:
                await self.send_error("not_found", str(exc), request_id)
        except Unavailable as exc:
            await self.send_error("unavailable", exc.message, request_id)
        except UNAVAILABLE_ERRORS:
            logger.warning("%s could not be handled: a service is unreachable", content["type"], exc_info=True)
            await self.send_error("unavailable", UNAVAILABLE, request_id)
        except Exception:  # a socket outlives any one request: say so, keep the connection
            logger.exception("%s failed", content["type"])
            await self.send_error("internal_error", "Something went wrong handling this request.", request_id)

    async def on_ping(self, content: dict[str, Any]) -> None:
        await self.send_json({"type": event_names.PONG, "id": content.get("id")})

    async def on_send(self, content: dict[str, Any]) -> None:
        text = content.get("content")
        if not isinstance(text, str):
            raise BadRequest("bad_request", '"content" must be a string.')
        if "\x00" in text:  # PostgreSQL text cannot hold it
            raise BadRequest("bad_request", '"content" must not contain NUL characters.')
        chat_id = frame_id(content, "chat_id", required=False)
        new_chat = content.get("new_chat") is True
        # The event_names.SENT event reaches every socket of this person through the group; when Redis
        # is out of reach, this socket gets it directly, then the reason nothing follows yet.
        try:
            stored = await database_sync_to_async(_chat_send)(
                self.user, content=text, chat_id=chat_id, new_chat=new_chat, request_id=content.get("request_id"),
                sent_from=self.sent_from, page=content.get("page"),
            )
        except SessionEnded:
            await self._end_session()
            return
        if stored is not None:
            await self.send_json(stored)
            raise Unavailable(UNAVAILABLE_SAVED)

    async def on_page(self, content: dict[str, Any]) -> None:
        chat_id = frame_id(content, "chat_id", required=False)
        answer = await database_sync_to_async(_page_answer)(self.user, content.get("page"), chat_id, self.sent_from)
        await self.send_json({**answer, "request_id": content.get("request_id")})

    async def on_cancel(self, content: dict[str, Any]) -> None:
        run_id = frame_id(content, "run_id", required=True)
        await database_sync_to_async(services.run_cancel)(user=self.user, run_id=run_id)

    async def on_confirm(self, content: dict[str, Any]) -> None:
        run_id = frame_id(content, "run_id", required=True)
        step_id = frame_id(content, "step_id", required=True)  # the question the person answers, never "the run's"
        approve = content.get("approve")
        if not isinstance(approve, bool):
            raise BadRequest("bad_request", '"approve" must be true or false.')
        comment = content.get("comment", "")
        if not isinstance(comment, str) or "\x00" in comment:
            raise BadRequest("bad_request", '"comment" must be a string without NUL characters.')
        await database_sync_to_async(services.run_confirm)(user=self.user, run_id=run_id, step_id=step_id,
                                                           approve=approve, comment=comment)

    async def on_feedback(self, content: dict[str, Any]) -> None:
        run_id = frame_id(content, "run_id", required=True)
        score = content.get("score")
        if isinstance(score, bool) or not isinstance(score, int):
            raise BadRequest("bad_request", '"score" must be 1 (thumbs up), -1 (thumbs down) or 0 (take it back).')
        comment = content.get("comment", "")
        if comment is None:
            comment = ""
        if not isinstance(comment, str):
            raise BadRequest("bad_request", '"comment" must be a string.')
        await database_sync_to_async(services.run_feedback)(user=self.user, run_id=run_id, score=score,
                                                            comment=comment)

    async def on_load(self, content: dict[str, Any]) -> None:
        chat_id = frame_id(content, "chat_id", required=False)
        before = frame_id(content, "before", required=False)
        if before is not None and chat_id is None:
            # A page of history belongs to one chat; "the current chat" may have changed since the last page.
            raise BadRequest("bad_request", '"before" needs the "chat_id" of the chat being paged.')
        limit = frame_limit(content, default=LOAD_LIMIT_DEFAULT, maximum=LOAD_LIMIT_MAX)
        with_steps = frame_flag(content, "steps")
        state = await database_sync_to_async(_chat_state)(self.user, chat_id, before=before, limit=limit,
                                                          with_steps=with_steps)
        state["request_id"] = content.get("request_id")
        await self.send_json(state)

    async def on_chats(self, content: dict[str, Any]) -> None:
        before = frame_id(content, "before", required=False)
        limit = frame_limit(content, default=CHATS_LIMIT_DEFAULT, maximum=CHATS_LIMIT_MAX)
        listed = await database_sync_to_async(_chats_listed)(self.user, before=before, limit=limit)
        listed["request_id"] = content.get("request_id")
        await self.send_json(listed)

    async def on_chat_rename(self, content: dict[str, Any]) -> None:
        chat_id = frame_id(content, "chat_id", required=True)
        title = content.get("title")
        if not isinstance(title, str):
            raise BadRequest("bad_request", '"title" must be a string.')
        if "\x00" in title:  # PostgreSQL text cannot hold it
            raise BadRequest("bad_request", '"title" must not contain NUL characters.')
        await database_sync_to_async(services.chat_rename)(user=self.user, chat_id=chat_id, title=title)

    async def on_chat_delete(self, content: dict[str, Any]) -> None:
        chat_id = frame_id(content, "chat_id", required=True)
        await database_sync_to_async(services.chat_delete)(user=self.user, chat_id=chat_id)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every message it hands a consumer, by a hop to
        # the one thread sync code runs on. Relayed events touch no database, and at a thousand a second
        # those hops queued behind each other: the hop cost daphne more than the relaying did. Everything
        # here that does use the database goes through database_sync_to_async, which closes stale
        # connections itself, on the thread that uses them.
        if message.get("type") == event_names.LAYER_BATCH:
            await self.assistant_events(message)
        else:
            await super().dispatch(message)

    async def assistant_events(self, message: dict[str, Any]) -> None:
        """Events for this person from a worker or another socket, relayed one by one, in order."""
        for event in message["events"]:
            if self.session_ended:
                return
            if event.get("type") == event_names.SESSION_ENDED:
                await self._close_ended()
                return
            await self.send_json(event)

    async def send_error(self, code: str, message: str, request_id: Any = None) -> None:
        await self.send_json({"type": event_names.ERROR, "code": code, "message": message, "request_id": request_id})

    async def send_json(self, content: Any, close: bool = False) -> None:
        # Within the bounds every event keeps (see assistant.live.events.bounded): valid JSON a browser reads
        # exactly, whatever a client or a model put in a row or an echoed value.
        await super().send_json(bounded(content), close=close)
