"""The live channel at /ws/assistant/: JSON events in both directions (see docs/protocol.md).

The consumer only parses frames and calls one service or read per event (assistant/conversation/); every id
a client sends is looked up among the person's own rows, so another person's id answers exactly like a missing
one. What it calls runs on a database thread; the watch that closes the socket when its session ends without a
signal is assistant/access/session_watch.py.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from assistant.access.authority import SentFrom, SessionEnded, session_ended_event, session_group
from assistant.access.session_watch import session_watch
from assistant.conversation import services
from assistant.conversation.frames import BadRequest, frame_flag, frame_id, frame_limit, frame_parse
from assistant.conversation.reads import (
    CHATS_LIMIT_DEFAULT,
    CHATS_LIMIT_MAX,
    LOAD_LIMIT_DEFAULT,
    LOAD_LIMIT_MAX,
    branch_state,
    chat_state,
    chats_listed,
    page_answer,
)
from assistant.conversation.socket_send import (
    UNAVAILABLE_ERRORS,
    chat_regenerate_from_socket,
    chat_send_from_socket,
)
from assistant.infra import event_names
from assistant.live import selectors
from assistant.live.events import bounded, user_group

logger = logging.getLogger(__name__)

# 4401 mirrors HTTP 401 in the private close-code range so clients can tell "log in" from a crash: no
# signed-in session at connect, or the session ended (logged out, expired, deactivated) while open.
CLOSE_UNAUTHENTICATED = 4401
UNAVAILABLE = "The assistant is briefly unavailable. In a moment, reload to see what was done."
UNAVAILABLE_SAVED = (
    "The assistant is briefly unavailable. Your message is saved and will be answered as soon as it is back."
)


class Unavailable(Exception):
    """Redis or the database could not be reached; `message` says what became of the request."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
        session_watch().add(self)
        # Runs from the person's sessions that ended unobserved stop before this tab loads them.
        try:
            await database_sync_to_async(services.ended_sessions_runs_end)(user=user)
        except Exception:  # the next connect tries again; a worker refuses such a run's tool calls anyway
            logger.warning("Could not end the runs of a person's ended sessions", exc_info=True)

    async def disconnect(self, code: int) -> None:
        session_watch().discard(self)
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
        session_watch().discard(self)
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
            event_names.REGENERATE: self.on_regenerate,
            event_names.BRANCH: self.on_branch,
        }
        handler = handlers.get(content["type"])
        request_id = content.get("request_id")
        if handler is None:
            await self.send_error("unknown_type", f"Unknown event type {content['type'][:100]!r}.", request_id)
            return
        try:
            await handler(content)
        except (BadRequest, services.Refused) as exc:
            await self.send_error(exc.code, exc.message, request_id, fields=getattr(exc, "fields", None))
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
        edit_of = frame_id(content, "edit_of", required=False)  # the person's earlier message this one rewrites
        if edit_of is not None and new_chat:
            raise BadRequest("bad_request", 'An edit ("edit_of") stays in its own chat: leave out "new_chat".')
        attachments = content.get("attachments", [])  # ids of files uploaded for this message
        if not isinstance(attachments, list) or not all(
                isinstance(each, int) and not isinstance(each, bool) and each > 0 for each in attachments):
            raise BadRequest("bad_request", '"attachments" must be a list of attachment ids.')
        await self._stored(chat_send_from_socket, self.user, content=text, chat_id=chat_id, new_chat=new_chat,
                           request_id=content.get("request_id"), sent_from=self.sent_from, page=content.get("page"),
                           edit_of=edit_of, attachments=attachments)

    async def on_regenerate(self, content: dict[str, Any]) -> None:
        message_id = frame_id(content, "message_id", required=True)  # the person's message to answer again
        await self._stored(chat_regenerate_from_socket, self.user, message_id=message_id,
                           request_id=content.get("request_id"), sent_from=self.sent_from)

    async def _stored(self, store: Any, *args: Any, **kwargs: Any) -> None:
        """A send or a regenerate: the event_names.SENT event reaches every socket of this person through the
        group; when Redis is out of reach, this socket gets it directly, then the reason nothing follows yet."""
        try:
            stored = await database_sync_to_async(store)(*args, **kwargs)
        except SessionEnded:
            await self._end_session()
            return
        if stored is not None:
            await self.send_json(stored)
            raise Unavailable(UNAVAILABLE_SAVED)

    async def on_branch(self, content: dict[str, Any]) -> None:
        message_id = frame_id(content, "message_id", required=True)  # a message of the branch to read
        limit = frame_limit(content, default=LOAD_LIMIT_DEFAULT, maximum=LOAD_LIMIT_MAX)
        state = await database_sync_to_async(branch_state)(self.user, message_id, limit=limit)
        state["request_id"] = content.get("request_id")
        await self.send_json(state)

    async def on_page(self, content: dict[str, Any]) -> None:
        chat_id = frame_id(content, "chat_id", required=False)
        answer = await database_sync_to_async(page_answer)(self.user, content.get("page"), chat_id, self.sent_from)
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
        arguments = content.get("arguments")  # approve with changes: the values the person approved
        if arguments is not None and not isinstance(arguments, dict):
            raise BadRequest("bad_request", '"arguments" must be an object of the action\'s values.')
        await database_sync_to_async(services.run_confirm)(user=self.user, run_id=run_id, step_id=step_id,
                                                           approve=approve, comment=comment, arguments=arguments)

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
        state = await database_sync_to_async(chat_state)(self.user, chat_id, before=before, limit=limit,
                                                          with_steps=with_steps)
        state["request_id"] = content.get("request_id")
        await self.send_json(state)

    async def on_chats(self, content: dict[str, Any]) -> None:
        before = frame_id(content, "before", required=False)
        limit = frame_limit(content, default=CHATS_LIMIT_DEFAULT, maximum=CHATS_LIMIT_MAX)
        listed = await database_sync_to_async(chats_listed)(self.user, before=before, limit=limit)
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

    async def send_error(self, code: str, message: str, request_id: Any = None, *,
                         fields: dict[str, str] | None = None) -> None:
        """`fields`: what is wrong with each value the person typed, by field name (a card's form shows each)."""
        error = {"type": event_names.ERROR, "code": code, "message": message, "request_id": request_id}
        await self.send_json({**error, "fields": fields} if fields else error)

    async def send_json(self, content: Any, close: bool = False) -> None:
        # Within the bounds every event keeps (see assistant.live.events.bounded): valid JSON a browser reads
        # exactly, whatever a client or a model put in a row or an echoed value.
        await super().send_json(bounded(content), close=close)
