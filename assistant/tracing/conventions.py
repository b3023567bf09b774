"""The OpenTelemetry GenAI semantic conventions the assistant's spans follow, in one place: the span names and
attribute keys of semantic conventions v1.41.0 (GenAI: "Development" status; names may change between releases,
and when they do, this module is what changes).

- a run: `invoke_agent {spec}`, operation `invoke_agent`, the spec as `gen_ai.agent.name`, the run as
  `gen_ai.agent.id`, its chat as `gen_ai.conversation.id`;
- a model call: `chat {model}`, operation `chat`, the chain entry that answered as `gen_ai.provider.name` (its part
  before ":"), models asked and answered, tokens in and out;
- a tool call: `execute_tool {tool}`, operation `execute_tool`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
  `gen_ai.tool.type` `function`.

The person's words (the question, the reply, a tool's arguments and result) are added only when
`ASSISTANT["TRACE_CONTENT"]` is true.
"""

from __future__ import annotations

import json
from typing import Any

from assistant.conf import assistant_settings

SEMCONV_VERSION = "1.41.0"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"


def content_on() -> bool:
    return bool(assistant_settings.TRACE_CONTENT)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:20_000]


def agent_span(*, spec: str, run_id: int, chat_id: int | None, model: str) -> tuple[str, dict[str, Any]]:
    return f"invoke_agent {spec}", {OPERATION: "invoke_agent", AGENT_NAME: spec, AGENT_ID: str(run_id),
                                    CONVERSATION: str(chat_id) if chat_id is not None else None,
                                    REQUEST_MODEL: model}


def agent_content(*, question: str, reply: str) -> dict[str, Any]:
    if not content_on():
        return {}
    return {INPUT_MESSAGES: _json([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
            OUTPUT_MESSAGES: _json([{"role": "assistant", "parts": [{"type": "text", "content": reply}]}])}


def chat_span(model: str) -> tuple[str, dict[str, Any]]:
    """A model call to the chain `model` ("openai:gpt-4.1-mini,anthropic:…"), named after its first entry."""
    first = str(model).split(",")[0].strip()
    return f"chat {first}", {OPERATION: "chat", REQUEST_MODEL: first, PROVIDER: first.split(":")[0] or None}


def chat_answered(*, provider: str, model: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {PROVIDER: str(provider).split(":")[0] or None, RESPONSE_MODEL: model or None,
            INPUT_TOKENS: input_tokens, OUTPUT_TOKENS: output_tokens}


def tool_span(*, name: str, call_id: str | None, arguments: Any = None) -> tuple[str, dict[str, Any]]:
    attributes = {OPERATION: "execute_tool", TOOL_NAME: name, TOOL_CALL_ID: call_id, TOOL_TYPE: "function"}
    if content_on() and arguments is not None:
        attributes[TOOL_ARGUMENTS] = _json(arguments)
    return f"execute_tool {name}", attributes


def tool_answered(result: Any) -> dict[str, Any]:
    return {TOOL_RESULT: _json(result)} if content_on() else {}
