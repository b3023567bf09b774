"""What a model sends, made fit to store and to act on before anything is written or run.

A model is untrusted input. PostgreSQL refuses NUL characters and unpaired surrogates in text and jsonb,
jsonb has no NaN or Infinity, columns have lengths, token counts have a range, and a provider's call ids
are neither unique nor bounded. Text is stored with replacement characters. A tool call that cannot be
stored as the model sent it is recorded with a `problem` and never run: the model is told what to
correct, and the run goes on.

Each call gets an id unique within its run, the provider's own when it is a plain one not used before in
the run, else one made here. That id is the call's identity: its step's `call_id`, what an approval
answers, and what pairs the call with its result when the conversation goes back to the provider.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from assistant.llm import ModelResponse, ToolCall, Usage
from assistant.models import AgentStep
from assistant.tools.validation import nul_errors

REPLACEMENT = "\ufffd"
MAX_NAME_CHARS = AgentStep._meta.get_field("tool_name").max_length or 200
# Deeper than any tool's arguments need; far below what the encoders and the database can take.
MAX_DEPTH = 32
MAX_COUNT = 2**31 - 1  # what an integer column holds
# Ids every provider accepts back (Anthropic's pattern, within OpenAI's and Mistral's lengths).
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SURROGATE_OR_NUL = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with NUL characters and unpaired surrogates replaced by U+FFFD (a pair written as two
    surrogates becomes the character it encodes)."""
    if "\x00" not in text:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    joined = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return _SURROGATE_OR_NUL.sub(REPLACEMENT, joined)


def count(value: Any) -> int:
    """A token count as an integer column holds it."""
    try:
        return max(0, min(int(value), MAX_COUNT))
    except (TypeError, ValueError, OverflowError):
        return 0


def storable_json(value: Any) -> tuple[Any, str | None]:
    """(a copy of `value` jsonb can hold, what had to change), with None when nothing did."""
    try:
        dumped = json.dumps(value, ensure_ascii=False, allow_nan=False)
        dumped.encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError):
        pass
    else:
        if "\\u0000" not in dumped:
            return value, None
    problems: list[str] = []
    fitted = _fit(value, 0, problems)
    return fitted, (problems[0] if problems else None)


def _fit(value: Any, depth: int, problems: list[str]) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        problems.append("a number that is not finite (NaN or Infinity)")
        return None
    if isinstance(value, str):
        cleaned = clean_text(value)
        if cleaned != value:
            problems.append("text with a NUL character or an unpaired surrogate")
        return cleaned
    if depth >= MAX_DEPTH:
        problems.append(f"values nested more than {MAX_DEPTH} levels deep")
        return None
    if isinstance(value, dict):
        return {_fit(str(key), depth + 1, problems): _fit(item, depth + 1, problems) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_fit(item, depth + 1, problems) for item in value]
    problems.append(f"a value JSON cannot hold ({type(value).__name__})")
    return None


def fit_response(response: ModelResponse) -> ModelResponse:
    """The response with storable text, model name and token counts; its tool calls are fitted when
    they are recorded (see `recorded_calls`), where the run's other calls are known."""
    return dataclasses.replace(
        response,
        text=clean_text(response.text),
        model=clean_text(response.model)[:MAX_NAME_CHARS],
        usage=Usage(count(response.usage.prompt_tokens), count(response.usage.completion_tokens),
                    cached_tokens=min(count(response.usage.cached_tokens), count(response.usage.prompt_tokens))),
    )


def ids_in(recorded: Iterable[dict[str, Any]]) -> set[str]:
    return {str(call.get("id")) for call in recorded}


def recorded_calls(calls: Sequence[ToolCall], *, step_seq: int, taken: set[str]) -> list[dict[str, Any]]:
    """The calls of one model answer as the run records them, in order: each with its own id (not in
    `taken`, the ids already used in the run, which this extends), a storable name and arguments, the
    provider's id when it was replaced, and the `problem` that keeps it from running, if any."""
    recorded = []
    for index, call in enumerate(calls):
        problem = None
        name = clean_text(call.name)[:MAX_NAME_CHARS]
        if name != call.name:
            problem = (f"There is no tool by that name: tool names are plain text of at most {MAX_NAME_CHARS} "
                       "characters. Call one of the offered tools by its exact name.")
        arguments, unstorable = storable_json(call.arguments)
        holding_nul = nul_errors(call.arguments)
        if holding_nul and problem is None:
            # The rule every channel's tool calls meet (the executor's, MCP's): the arguments named.
            named = "; ".join(f"{name} {problem_}" for name, problem_ in holding_nul.items())
            problem = f"The arguments do not fit this tool: {named}. Send the call again without them."
        if unstorable and problem is None:
            problem = f"The arguments contain {unstorable}, which cannot be stored. Send the call again without it."
        call_id = call.id if _PLAIN_ID.fullmatch(call.id) and call.id not in taken else _server_id(
            step_seq, index, taken
        )
        taken.add(call_id)
        entry: dict[str, Any] = {"id": call_id, "name": name, "arguments": arguments}
        if call.invalid_arguments is not None:
            entry["invalid_arguments"] = clean_text(call.invalid_arguments)
        if call_id != call.id:
            entry["provider_id"] = clean_text(call.id)[:MAX_NAME_CHARS]
        if problem is not None:
            entry["problem"] = problem
        recorded.append(entry)
    return recorded


def _server_id(step_seq: int, index: int, taken: set[str]) -> str:
    # Nine letters and digits: a shape every provider takes back.
    base = f"s{step_seq:04d}c{index:03d}"
    candidate, suffix = base, 0
    while candidate in taken:
        suffix += 1
        candidate = f"{base}x{suffix}"
    return candidate
