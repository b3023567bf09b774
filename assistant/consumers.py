"""The live channel at /ws/assistant/: JSON events in both directions (see docs/protocol.md).

The consumer only parses frames and calls one service or selector per event; every id a client sends
is looked up among the person's own rows, so another person's id answers exactly like a missing one.
"""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from assistant import selectors, services
from assistant.conf import assistant_settings
from assistant.events import bounded, user_group
from assistant.payloads import chat_payload, message_payload, run_payload, step_payload

# 4401 mirrors HTTP 401 in the private close-code range so clients can tell "log in" from a crash.
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
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
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
        # The "assistant.sent" event reaches every socket of this person through the group.
        await database_sync_to_async(services.chat_send)(user=self.user, content=text, chat_id=chat_id,
                                                         new_chat=new_chat, request_id=content.get("request_id"))

    async def on_cancel(self, content: dict[str, Any]) -> None:
        run_id = _id(content, "run_id", required=True)
        await database_sync_to_async(services.run_cancel)(user=self.user, run_id=run_id)

    async def on_confirm(self, content: dict[str, Any]) -> None:
        run_id = _id(content, "run_id", required=True)
        approve = content.get("approve")
        if not isinstance(approve, bool):
            raise BadRequest("bad_request", '"approve" must be true or false.')
        await database_sync_to_async(services.run_confirm)(user=self.user, run_id=run_id, approve=approve)

    async def on_load(self, content: dict[str, Any]) -> None:
        chat_id = _id(content, "chat_id", required=False)
        state = await database_sync_to_async(_chat_state)(self.user, chat_id)
        state["request_id"] = content.get("request_id")
        await self.send_json(state)

    async def assistant_events(self, message: dict[str, Any]) -> None:
        """Events for this person from a worker or another socket, relayed one by one, in order."""
        for event in message["events"]:
            await self.send_json(event)

    async def send_error(self, code: str, message: str, request_id: Any = None) -> None:
        await self.send_json({"type": "assistant.error", "code": code, "message": message, "request_id": request_id})

    async def send_json(self, content: Any, close: bool = False) -> None:
        # Within the bounds every event keeps (see assistant.events.bounded): valid JSON a browser reads
        # exactly, whatever a client or a model put in a row or an echoed value.
        await super().send_json(bounded(content), close=close)
