"""The live channel at /ws/assistant/: JSON events in both directions (see docs/protocol.md).

The consumer only parses frames and calls one service or selector per event; every id a client sends
is looked up among the person's own rows, so another person's id answers exactly like a missing one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from assistant import selectors, services
from assistant.authority import SentFrom, session_acts_as, session_ended_event, session_group
from assistant.conf import assistant_settings
from assistant.events import user_group
from assistant.payloads import chat_payload, message_payload, run_payload, step_payload

logger = logging.getLogger(__name__)

# 4401 mirrors HTTP 401 in the private close-code range so clients can tell "log in" from a crash: no
# signed-in session at connect, or the session ended (logged out, expired, deactivated) while open.
CLOSE_UNAUTHENTICATED = 4401


class BadRequest(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _id(content: dict[str, Any], key: str, *, required: bool) -> int | None:
    value = content.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit() or int(value) < 1:
        raise BadRequest("bad_request", f'"{key}" must be a positive integer id.')
    return int(value)


def _chat_state(user: Any, chat_id: int | None) -> dict[str, Any]:
    chat = selectors.chat_get(user=user, chat_id=chat_id) if chat_id is not None else selectors.chat_current(user=user)
    if chat is None:
        return {"type": "assistant.messages_loaded", "chat": None, "messages": [], "active_run": None,
                "steps": [], "pending_confirmation": None}
    run = selectors.chat_active_run(chat=chat)
    pending = selectors.run_pending_confirmation(run=run) if run is not None else None
    return {
        "type": "assistant.messages_loaded",
        "chat": chat_payload(chat),
        "messages": [message_payload(message) for message in selectors.chat_messages(chat=chat)],
        "active_run": run_payload(run) if run is not None else None,
        "steps": [step_payload(step) for step in selectors.run_steps(run=run)] if run is not None else [],
        "pending_confirmation": step_payload(pending) if pending is not None else None,
    }


class AssistantConsumer(AsyncJsonWebsocketConsumer):
    session_ended = False
    _watcher: asyncio.Task[None] | None = None

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
        self._watcher = asyncio.create_task(self._watch_session())
        # Runs from the person's sessions that ended unobserved stop before this tab loads them.
        try:
            await database_sync_to_async(services.ended_sessions_runs_end)(user=user)
        except Exception:  # the next connect tries again; a worker refuses such a run's tool calls anyway
            logger.warning("Could not end the runs of a person's ended sessions", exc_info=True)

    async def disconnect(self, code: int) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        await self._leave_groups()

    async def _leave_groups(self) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = []

    # --- the session's life ------------------------------------------------------------------

    async def _watch_session(self) -> None:
        """A cheap periodic re-check (two primary-key reads) instead of database work on every frame: it
        notices what sends no signal — expiry, a deleted session, a changed password, a deactivated user."""
        while not self.session_ended:
            await asyncio.sleep(float(assistant_settings.SESSION_CHECK_SECONDS))
            try:
                live = await self._session_live()
            except Exception:  # a database hiccup is not a logout: keep the socket and look again later
                logger.warning("Could not re-check the session of a socket", exc_info=True)
                continue
            if not live:
                await self._end_session()
                return

    async def _session_live(self) -> bool:
        return await database_sync_to_async(session_acts_as)(self.sent_from.session_key, self.user.pk)

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
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
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
        if len(text_data.encode()) > assistant_settings.MAX_FRAME_BYTES:
            limit = assistant_settings.MAX_FRAME_BYTES
            await self.send_error("frame_too_large", f"Frames are limited to {limit} bytes.")
            return
        try:
            content = json.loads(text_data)
        except json.JSONDecodeError:
            await self.send_error("bad_frame", "Frames must be JSON objects.")
            return
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self.send_error("bad_frame", 'Frames must be JSON objects with a string "type".')
            return
        await self.receive_json(content)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        handlers = {
            "assistant.ping": self.on_ping,
            "assistant.send": self.on_send,
            "assistant.cancel": self.on_cancel,
            "assistant.confirm": self.on_confirm,
            "assistant.load": self.on_load,
        }
        handler = handlers.get(content["type"])
        request_id = content.get("request_id")
        if handler is None:
            await self.send_error("unknown_type", f"Unknown event type {content['type'][:100]!r}.", request_id)
            return
        try:
            await handler(content)
        except BadRequest as exc:
            await self.send_error(exc.code, exc.message, request_id)
        except services.Refused as exc:
            await self.send_error(exc.code, exc.message, request_id)
        except selectors.NotFound as exc:
            if content["type"] == "assistant.load":
                await self.send_json({"type": "assistant.thread_failed", "chat_id": content.get("chat_id"),
                                      "error": "That conversation does not exist.", "request_id": request_id})
            else:
                await self.send_error("not_found", str(exc), request_id)

    async def on_ping(self, content: dict[str, Any]) -> None:
        await self.send_json({"type": "assistant.pong", "id": content.get("id")})

    async def on_send(self, content: dict[str, Any]) -> None:
        text = content.get("content")
        if not isinstance(text, str):
            raise BadRequest("bad_request", '"content" must be a string.')
        chat_id = _id(content, "chat_id", required=False)
        new_chat = content.get("new_chat") is True
        # A message is an instruction to act as the person: only while the session it comes with is live.
        if not await self._session_live():
            await self._end_session()
            return
        # The "assistant.sent" event reaches every socket of this person through the group.
        await database_sync_to_async(services.chat_send)(user=self.user, content=text, chat_id=chat_id,
                                                         new_chat=new_chat, request_id=content.get("request_id"),
                                                         sent_from=self.sent_from)

    async def on_cancel(self, content: dict[str, Any]) -> None:
        run_id = _id(content, "run_id", required=True)
        await database_sync_to_async(services.run_cancel)(user=self.user, run_id=run_id)

    async def on_confirm(self, content: dict[str, Any]) -> None:
        run_id = _id(content, "run_id", required=True)
        step_id = _id(content, "step_id", required=True)  # the question the person answers, never "the run's"
        approve = content.get("approve")
        if not isinstance(approve, bool):
            raise BadRequest("bad_request", '"approve" must be true or false.')
        await database_sync_to_async(services.run_confirm)(user=self.user, run_id=run_id, step_id=step_id,
                                                           approve=approve)

    async def on_load(self, content: dict[str, Any]) -> None:
        chat_id = _id(content, "chat_id", required=False)
        state = await database_sync_to_async(_chat_state)(self.user, chat_id)
        state["request_id"] = content.get("request_id")
        await self.send_json(state)

    async def assistant_events(self, message: dict[str, Any]) -> None:
        """Events for this person from a worker or another socket, relayed one by one, in order."""
        for event in message["events"]:
            if self.session_ended:
                return
            if event.get("type") == "assistant.session_ended":
                await self._close_ended()
                return
            await self.send_json(event)

    async def send_error(self, code: str, message: str, request_id: Any = None) -> None:
        await self.send_json({"type": "assistant.error", "code": code, "message": message, "request_id": request_id})
