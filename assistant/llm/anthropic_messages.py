"""`anthropic:MODEL` — the Messages API with tools through the official SDK (the `anthropic` extra).

System messages become the top-level `system` parameter; tool results become `tool_result`
blocks in a user turn; consecutive messages of one role are merged because the API wants
user and assistant turns to alternate.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .errors import (
    ModelConfigurationError,
)
from .remote import RemoteModel, cached_client, parse_arguments
from .types import Message, ModelResponse, TextDeltaCallback, ToolCall, ToolSpec, Usage

ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ModelConfigurationError(
            "The anthropic provider needs the optional extra: "
            "install the assistant again with its extra [anthropic], as in the README's Install step "
            "(from a checkout: pip install '/path/to/this/checkout[anthropic]')."
        ) from exc
    return anthropic


def messages_to_anthropic(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, Messages API turns) for neutral messages."""
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            system_parts.append(message.content)
            continue
        blocks: list[dict[str, Any]]
        if message.role == "tool":
            role = "user"
            blocks = [
                {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
            ]
        elif message.role == "assistant":
            role = "assistant"
            blocks = [{"type": "text", "text": message.content}] if message.content else []
            blocks += [
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            ]
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.content}]
            blocks += [{"type": "image", "source": {"type": "base64", "media_type": picture.media_type,
                                                    "data": base64.b64encode(picture.data).decode("ascii")}}
                       for picture in message.pictures]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(part for part in system_parts if part), turns


def tool_to_anthropic(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": dict(tool.parameters)}


class AnthropicMessagesModel(RemoteModel):
    """A Messages API endpoint. See `ProviderConfig` for the options."""

    credential_hint = "ANTHROPIC_API_KEY"

    def load_sdk(self) -> None:
        _sdk()

    def _client(self) -> Any:
        config = self.config
        if not config.api_key:
            raise self._missing_key()
        sdk = _sdk()
        base_url = config.base_url or ANTHROPIC_DEFAULT_BASE_URL
        return cached_client(
            ("anthropic", base_url, config.api_key, config.timeout),
            lambda: sdk.Anthropic(
                api_key=config.api_key, base_url=base_url, timeout=config.timeout, max_retries=0
            ),
        )

    def request_body(self, messages: list[Message], tools: list[ToolSpec], *, stream: bool) -> dict[str, Any]:
        """The JSON body sent for these messages and tools (also used by the benchmark)."""
        system, turns = messages_to_anthropic(messages)
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_output_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [tool_to_anthropic(t) for t in tools]
        if stream:
            body["stream"] = True
        return body

    def _call(
        self, messages: list[Message], tools: list[ToolSpec], on_text_delta: TextDeltaCallback | None
    ) -> ModelResponse:
        stream = on_text_delta is not None and self.config.stream
        body = self.request_body(messages, tools, stream=stream)
        client = self._client()
        sdk = _sdk()
        with self.sdk_errors(sdk):
            if stream:
                assert on_text_delta is not None
                return self._read_stream(client.messages.create(**body), on_text_delta)
            return self._read_message(client.messages.create(**body))

    def _read_message(self, message: Any) -> ModelResponse:
        text: list[str] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "tool_use":
                arguments = block.input if isinstance(block.input, dict) else {}
                invalid = None if isinstance(block.input, dict) else json.dumps(block.input)
                calls.append(
                    ToolCall(id=block.id, name=block.name, arguments=arguments, invalid_arguments=invalid)
                )
        usage = message.usage
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=_usage(usage),
            model=message.model or self.config.model,
            provider=self.name,
        )

    def _read_stream(self, stream: Any, on_text_delta: TextDeltaCallback) -> ModelResponse:
        text: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        prompt_tokens = completion_tokens = cached_tokens = 0
        model = ""
        with stream:
            for event in stream:
                if event.type == "message_start":
                    model = event.message.model or model
                    started = _usage(event.message.usage)
                    prompt_tokens, cached_tokens = started.prompt_tokens, started.cached_tokens
                    completion_tokens = event.message.usage.output_tokens or 0
                elif event.type == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        blocks[event.index] = {"id": block.id, "name": block.name, "json": []}
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        text.append(delta.text)
                        on_text_delta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["json"].append(delta.partial_json)
                elif event.type == "message_delta" and event.usage is not None:
                    # The final count: message_delta's output_tokens is cumulative.
                    completion_tokens = event.usage.output_tokens or completion_tokens
        calls = []
        for index in sorted(blocks):
            block = blocks[index]
            arguments, invalid = parse_arguments("".join(block["json"]))
            calls.append(
                ToolCall(id=block["id"], name=block["name"], arguments=arguments, invalid_arguments=invalid)
            )
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=Usage(prompt_tokens, completion_tokens, cached_tokens=cached_tokens),
            model=model or self.config.model,
            provider=self.name,
        )


def _usage(reported: Any) -> Usage:
    """A message's tokens: its prompt is what it read anew, wrote to the prompt cache and read from it (the API
    counts the three apart); the last are its cached tokens."""
    cache_read = getattr(reported, "cache_read_input_tokens", None) or 0
    cache_written = getattr(reported, "cache_creation_input_tokens", None) or 0
    return Usage((reported.input_tokens or 0) + cache_read + cache_written, reported.output_tokens or 0,
                 cached_tokens=cache_read)
