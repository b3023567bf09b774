"""The live channel at /ws/assistant/. For now it authenticates and answers `assistant.ping`;
the turn's events (send, cancel, confirm, load) are added by the turn."""

from __future__ import annotations

import json
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from assistant.conf import assistant_settings

# 4401 mirrors HTTP 401 in the private close-code range so clients can tell "log in" from a crash.
CLOSE_UNAUTHENTICATED = 4401


class AssistantConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.accept()

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
        if content["type"] == "assistant.ping":
            await self.send_json({"type": "assistant.pong", "id": content.get("id")})
            return
        await self.send_error("unknown_type", f"Unknown event type {content['type'][:100]!r}.")

    async def send_error(self, code: str, message: str) -> None:
        await self.send_json({"type": "assistant.error", "code": code, "message": message})
