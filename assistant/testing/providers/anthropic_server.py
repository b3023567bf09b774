"""A fake Anthropic Messages API server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .server import FakeServer, Reply, split_text

FakeCall = tuple[str, str, dict[str, Any]]


class FakeAnthropicServer(FakeServer):
    """Answers POST /v1/messages; refuses bodies the real API would refuse."""

    path = "/v1/messages"

    def default_reply(self, body: Any) -> Reply:
        if body.get("stream"):
            return anthropic_stream(["ok"])
        return anthropic_message("ok")

    def bad_request(self, message: str) -> Reply:
        return Reply(status=400, json={"type": "error", "error": {"type": "invalid_request_error", "message": message}})

    def validate(self, body: Any, headers: dict[str, str]) -> str | None:
        # Older SDKs send the key as x-api-key, newer ones as a bearer token; the API takes both.
        if not headers.get("x-api-key") and not headers.get("authorization", "").startswith("Bearer "):
            return "missing API key (x-api-key or Authorization: Bearer)"
        if not headers.get("anthropic-version"):
            return "missing anthropic-version header"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: field required"
        if not isinstance(body.get("model"), str):
            return "model: field required"
        if "system" in body and not isinstance(body["system"], str | list):
            return "system must be a string or a list of text blocks"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        previous_tool_uses: set[str] = set()
        for number, message in enumerate(messages):
            role = message.get("role")
            if role not in ("user", "assistant"):
                return f"messages.{number}.role: {role!r} is not user or assistant (system goes top-level)"
            expected = "user" if number % 2 == 0 else "assistant"
            if role != expected:
                return f"messages.{number}: roles must alternate, starting with user"
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or not blocks:
                return f"messages.{number}.content must be a string or a non-empty list of blocks"
            uses: set[str] = set()
            for block in blocks:
                kind = block.get("type")
                if kind == "tool_result":
                    if role != "user" or block.get("tool_use_id") not in previous_tool_uses:
                        return f"messages.{number}: tool_result for unknown tool_use_id {block.get('tool_use_id')!r}"
                elif kind == "tool_use":
                    if role != "assistant" or not isinstance(block.get("input"), dict):
                        return f"messages.{number}: malformed tool_use block"
                    uses.add(block["id"])
                elif kind == "text":
                    if not isinstance(block.get("text"), str) or not block["text"]:
                        return f"messages.{number}: text blocks must be non-empty"
                else:
                    return f"messages.{number}: unknown block type {kind!r}"
            previous_tool_uses = uses
        for tool in body.get("tools") or ():
            if not tool.get("name") or (tool.get("input_schema") or {}).get("type") != "object":
                return "tools need a name and an input_schema of type object"
        return None


def _usage(usage: tuple[int, int]) -> dict[str, int]:
    return {"input_tokens": usage[0], "output_tokens": usage[1]}


def anthropic_message(
    text: str = "",
    tool_uses: Sequence[FakeCall] = (),
    *,
    usage: tuple[int, int] = (13, 5),
    model: str = "fake-claude",
) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": id_, "name": name, "input": args} for id_, name, args in tool_uses]
    return Reply(
        json={
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if tool_uses else "end_turn",
            "stop_sequence": None,
            "usage": _usage(usage),
        }
    )


def anthropic_stream(
    text_chunks: Sequence[str] = (),
    tool_uses: Sequence[FakeCall] = (),
    *,
    usage: tuple[int, int] = (13, 5),
    model: str = "fake-claude",
) -> Reply:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if text_chunks:
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
        )
        events += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
            )
            for piece in text_chunks
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for id_, name, args in tool_uses:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": id_, "name": name, "input": {}},
                },
            )
        )
        events += [
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
            for piece in split_text(json.dumps(args), 3)
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if tool_uses else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return Reply(sse=events)
