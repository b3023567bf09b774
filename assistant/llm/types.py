"""Provider-neutral shapes: messages, tool calls, responses, and the protocol the loop calls.

Every adapter maps these to its wire format and back, so the loop, the run trace and the tests
never see a provider's own types.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

#: Called with each piece of reply text as it arrives, in order.
TextDeltaCallback = Callable[[str], None]


@dataclass(frozen=True)
class ToolCall:
    """The model asking for one tool to run.

    `invalid_arguments` holds the raw text when the model produced arguments that are not a JSON
    object; `arguments` is then empty and the loop should answer with an error result instead of
    running the tool.
    """

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    invalid_arguments: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.invalid_arguments is not None:
            data["invalid_arguments"] = self.invalid_arguments
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        arguments = data.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ValueError(f"Tool call arguments must be an object, not {type(arguments).__name__}.")
        return cls(
            id=str(data["id"]),
            name=str(data["name"]),
            arguments=dict(arguments),
            invalid_arguments=data.get("invalid_arguments"),
        )


#: The JSON Schema `format` of a tool argument that names one of the person's attachments by id (a form's file
#: field; assistant/tools/schema.py): a model that reads schemas knows such a tool takes a file.
ATTACHMENT_FORMAT = "assistant-attachment"


@dataclass(frozen=True)
class Picture:
    """A picture shown to the model beside a person's words (a file they attached): its type and its bytes. A
    provider that takes pictures sends it as a content part of the message; the others leave it out."""

    media_type: str
    data: bytes
    name: str = ""

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"


@dataclass(frozen=True)
class Message:
    """One message of a conversation.

    `tool_calls` is only used on assistant messages; `tool_call_id` only on tool messages, which
    carry one tool's result (a string, usually JSON) back to the model.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # Pictures beside the words of a user message (not part of `to_dict`: a recording keeps the words).
    pictures: tuple[Picture, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Unknown message role {self.role!r}; use one of {', '.join(sorted(ROLES))}.")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("Only assistant messages carry tool calls.")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("A tool message needs the id of the tool call it answers.")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("Only tool messages carry a tool_call_id.")
        if self.pictures and self.role != "user":
            raise ValueError("Only user messages carry pictures.")

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str, pictures: Sequence[Picture] = ()) -> Message:
        return cls("user", content, pictures=tuple(pictures))

    @classmethod
    def assistant(cls, content: str = "", tool_calls: Sequence[ToolCall] = ()) -> Message:
        return cls("assistant", content, tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str) -> Message:
        """A tool's result, answering the call with id `tool_call_id`."""
        return cls("tool", content, tool_call_id=tool_call_id)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(ToolCall.from_dict(call) for call in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
        )


@dataclass(frozen=True)
class Usage:
    """Tokens one model call used, as the provider reported them (estimated for the local models)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Of the prompt's tokens, those the provider read from its prompt cache (priced lower; assistant/llm/prices.py).
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(frozen=True)
class ModelResponse:
    """What one model call produced: text and/or tool calls, usage, and who answered.

    `model` is the model name the provider reported (e.g. `gpt-4o-mini-2024-07-18`, `offline-demo`);
    `provider` is the entry of the model chain that answered (e.g. `openai:gpt-4o-mini`);
    `is_demo` is true for the built-in offline model, which the UI labels as a demo.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    is_demo: bool = False

    def to_message(self) -> Message:
        """The assistant message to append to the conversation before running the tool calls."""
        return Message.assistant(self.text, self.tool_calls)


@runtime_checkable
class ToolSpec(Protocol):
    """What a model needs to know about a tool; any object with these attributes will do."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Tool:
    """A plain ToolSpec, for tests, scripts and tools that are not views."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )


@runtime_checkable
class ChatModel(Protocol):
    """The interface the loop calls. `get_model()` returns one of these."""

    #: The configured spec, e.g. `offline`, `openai:gpt-4o-mini` or a comma-separated chain.
    name: str
    #: True when the answers come from the built-in demo model.
    is_demo: bool

    def call_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text_delta: TextDeltaCallback | None = None,
    ) -> ModelResponse:
        """Answer the conversation with text and/or calls of the given tools."""
        ...

    def complete(
        self, messages: Sequence[Message], *, on_text_delta: TextDeltaCallback | None = None
    ) -> ModelResponse:
        """Answer with text only (summaries, plans); no tools are offered."""
        ...
