"""A fake OpenAI-compatible Chat Completions server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .server import FakeServer, Reply, split_text

ROLES = {"system", "user", "assistant", "tool", "developer"}
# (id, name, arguments) of one tool call in a reply.
FakeCall = tuple[str, str, dict[str, Any]]


class FakeOpenAIServer(FakeServer):
    """Answers POST /v1/chat/completions; refuses bodies the real API would refuse."""

    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    def default_reply(self, body: Any) -> Reply:
        if body.get("stream"):
            return openai_stream(["ok"])
        return openai_completion("ok")

    def bad_request(self, message: str) -> Reply:
        return Reply(status=400, json={"error": {"message": message, "type": "invalid_request_error"}})

    def validate(self, body: Any, headers: dict[str, str]) -> str | None:
        if not headers.get("authorization", "").startswith("Bearer "):
            return "missing bearer token"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "model is required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages must be a non-empty list"
        open_calls: set[str] = set()
        for number, message in enumerate(messages):
            role = message.get("role")
            if role not in ROLES:
                return f"messages[{number}].role {role!r} is invalid"
            if role == "tool":
                if message.get("tool_call_id") not in open_calls:
                    return f"messages[{number}] answers an unknown tool_call_id {message.get('tool_call_id')!r}"
                if not isinstance(message.get("content"), str):
                    return f"messages[{number}].content must be a string"
            elif role == "assistant" and message.get("tool_calls"):
                for call in message["tool_calls"]:
                    function = call.get("function") or {}
                    if call.get("type") != "function" or not call.get("id") or not function.get("name"):
                        return f"messages[{number}].tool_calls has a malformed call"
                    try:
                        json.loads(function.get("arguments", ""))
                    except (TypeError, json.JSONDecodeError):
                        return f"messages[{number}].tool_calls arguments must be a JSON string"
                    open_calls.add(call["id"])
            elif role == "user" and isinstance(message.get("content"), list):
                problem = _content_parts_problem(message["content"])
                if problem:
                    return f"messages[{number}].content {problem}"
            elif not isinstance(message.get("content"), str):
                return f"messages[{number}].content must be a string"
        for tool in body.get("tools") or ():
            function = tool.get("function") or {}
            if tool.get("type") != "function" or not function.get("name"):
                return "tools must be function tools with a name"
            if (function.get("parameters") or {}).get("type") != "object":
                return f"tool {function.get('name')} parameters must be a JSON Schema object"
        if "stream_options" in body and not body.get("stream"):
            return "stream_options is only allowed with stream=true"
        return None


def _content_parts_problem(parts: list[Any]) -> str | None:
    """What is wrong with a user message's content parts (text, and images as an https or data URL), if anything."""
    if not parts:
        return "must not be an empty list"
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        url = (part.get("image_url") or {}).get("url") if kind == "image_url" else None
        if isinstance(url, str) and (url.startswith("https://") or url.startswith("data:image/")):
            continue
        return "has a part that is neither text nor an image URL"
    return None


def openai_completion(
    text: str = "",
    tool_calls: Sequence[FakeCall] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    model: str = "fake-gpt",
) -> Reply:
    """A non-streamed chat.completion."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for id_, name, args in tool_calls
        ]
    return Reply(
        json={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
        }
    )


def openai_stream(
    text_chunks: Sequence[str] = (),
    tool_calls: Sequence[FakeCall] = (),
    *,
    usage: tuple[int, int] | None = (11, 7),
    model: str = "fake-gpt",
    cached: int = 0,
) -> Reply:
    """A streamed chat.completion: text deltas, tool calls with arguments in fragments, usage last (`cached`: of
    its prompt tokens, those read from the prompt cache)."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": piece})) for piece in text_chunks]
    for index, (id_, name, args) in enumerate(tool_calls):
        events.append(
            (
                None,
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "id": id_, "type": "function", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                ),
            )
        )
        for piece in split_text(json.dumps(args), 3):
            events.append((None, chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
    events.append((None, chunk({}, "tool_calls" if tool_calls else "stop")))
    if usage is not None:
        events.append(
            (
                None,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage),
                              **({"prompt_tokens_details": {"cached_tokens": cached}} if cached else {})},
                },
            )
        )
    events.append((None, "[DONE]"))
    return Reply(sse=events)
