"""`openai:MODEL` — Chat Completions with tools through the official SDK, streamed when listened to.

`base_url` reaches any compatible server (Ollama, vLLM, llama.cpp's server, OpenRouter, Azure).
The SDK's own retries are off: retry, backoff and the breaker live in failover, shared by all
providers.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .errors import ModelConfigurationError, ProviderError
from .remote import RemoteModel, cached_client, parse_arguments
from .types import Message, ModelResponse, TextDeltaCallback, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    import openai

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Compatible servers without a key still need a non-empty one in the Authorization header.
_NO_KEY = "not-needed"


def _sdk() -> Any:
    # Imported on first use (about a second on a small machine): a process that never calls an
    # OpenAI-compatible model does not pay for it at start; a worker loads it at its own start (warmup.py).
    try:
        import openai
    except ImportError as exc:
        raise ModelConfigurationError("The openai provider needs the `openai` package: pip install openai.") from exc
    return openai


def message_to_openai(message: Message) -> dict[str, Any]:
    """One neutral message as a Chat Completions message."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.invalid_arguments
                        if call.invalid_arguments is not None
                        else json.dumps(call.arguments),
                    },
                }
                for call in message.tool_calls
            ],
        }
    if message.pictures:
        # The words, then each picture as an image part (a data URL: nothing for the provider to fetch).
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        parts += [{"type": "image_url", "image_url": {"url": picture.data_url()}} for picture in message.pictures]
        return {"role": message.role, "content": parts}
    return {"role": message.role, "content": message.content}


def tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
    }


class OpenAIChatModel(RemoteModel):
    """A Chat Completions endpoint. See `ProviderConfig` for the options."""

    credential_hint = "OPENAI_API_KEY"

    def load_sdk(self) -> None:
        _sdk()

    def _client(self) -> openai.OpenAI:
        config = self.config
        if not config.api_key and not config.base_url:
            raise self._missing_key()
        base_url = config.base_url or OPENAI_DEFAULT_BASE_URL
        api_key = config.api_key or _NO_KEY
        sdk = _sdk()
        return cached_client(
            ("openai", base_url, api_key, config.timeout),
            lambda: sdk.OpenAI(api_key=api_key, base_url=base_url, timeout=config.timeout, max_retries=0),
        )

    def request_body(self, messages: list[Message], tools: list[ToolSpec], *, stream: bool) -> dict[str, Any]:
        """The JSON body sent for these messages and tools (also used by the benchmark)."""
        config = self.config
        limit_field = config.max_tokens_field or (
            "max_tokens" if config.base_url else "max_completion_tokens"
        )
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [message_to_openai(m) for m in messages],
            limit_field: config.max_output_tokens,
        }
        if tools:
            body["tools"] = [tool_to_openai(t) for t in tools]
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _call(
        self, messages: list[Message], tools: list[ToolSpec], on_text_delta: TextDeltaCallback | None
    ) -> ModelResponse:
        stream = on_text_delta is not None and self.config.stream
        body = self.request_body(messages, tools, stream=stream)
        client = self._client()
        with self.sdk_errors(_sdk()):
            if stream:
                assert on_text_delta is not None
                return self._read_stream(client.chat.completions.create(**body), on_text_delta)
            return self._read_completion(client.chat.completions.create(**body))

    def _read_completion(self, completion: Any) -> ModelResponse:
        if not completion.choices:
            raise ProviderError(
                f"{self.name}: the answer had no choices.", kind="transient", provider=self.name
            )
        message = completion.choices[0].message
        calls = []
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is None:
                continue  # a custom (non-function) tool call, which this product never offers
            arguments, invalid = parse_arguments(function.arguments or "")
            calls.append(
                ToolCall(id=call.id, name=function.name, arguments=arguments, invalid_arguments=invalid)
            )
        usage = completion.usage
        return ModelResponse(
            text=message.content or "",
            tool_calls=tuple(calls),
            usage=_usage(usage),
            model=completion.model or self.config.model,
            provider=self.name,
        )

    def _read_stream(self, stream: Any, on_text_delta: TextDeltaCallback) -> ModelResponse:
        text: list[str] = []
        # Tool calls arrive in fragments keyed by index: the first carries id and name, the rest carry
        # pieces of the JSON arguments. A fragment with a different id at an index already in use starts
        # a new call (some compatible servers send every call at index 0). Ids are kept as sent, even
        # when two calls share one: the run loop gives each call its own identity.
        slots: list[dict[str, Any]] = []
        current: dict[Any, dict[str, Any]] = {}
        usage = Usage()
        model = ""
        with stream:
            for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        on_text_delta(delta.content)
                    for fragment in delta.tool_calls or ():
                        slot = current.get(fragment.index)
                        if slot is None or (fragment.id and slot["id"] and fragment.id != slot["id"]):
                            slot = {"index": fragment.index, "id": "", "name": "", "arguments": []}
                            current[fragment.index] = slot
                            slots.append(slot)
                        if fragment.id:
                            slot["id"] = fragment.id
                        if fragment.function is not None:
                            if fragment.function.name:
                                slot["name"] += fragment.function.name
                            if fragment.function.arguments:
                                slot["arguments"].append(fragment.function.arguments)
        calls = []
        ordered = sorted(enumerate(slots), key=lambda item: (item[1]["index"] or 0, item[0]))
        for position, (_, slot) in enumerate(ordered):
            arguments, invalid = parse_arguments("".join(slot["arguments"]))
            calls.append(
                ToolCall(
                    id=slot["id"] or f"call_{position}",
                    name=slot["name"],
                    arguments=arguments,
                    invalid_arguments=invalid,
                )
            )
        return ModelResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            usage=usage,
            model=model or self.config.model,
            provider=self.name,
        )


def _usage(reported: Any) -> Usage:
    """The tokens a completion reports, with those of its prompt read from the provider's cache."""
    if reported is None:
        return Usage()
    details = getattr(reported, "prompt_tokens_details", None)
    return Usage(reported.prompt_tokens or 0, reported.completion_tokens or 0,
                 cached_tokens=(getattr(details, "cached_tokens", None) or 0) if details is not None else 0)
