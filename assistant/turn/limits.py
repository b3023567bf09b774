"""The limits of one run (the run keeps the settings it was queued under, see `run_setting`): model calls,
tokens, tool calls, the same call asked for again and again, and working time. Each ends the run with its
own `stop_reason` and a sentence the person reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.llm import Message
from assistant.models import AgentRun, AgentStep
from assistant.runs.allowances import allowance_now, allowance_stop_words
from assistant.runs.lifecycle import run_setting
from assistant.society.budget import Usage

Status = AgentRun.Status
Kind = AgentStep.Kind


class StopRun(Exception):
    """Ends the run with `status`; `message` is what the user reads."""

    def __init__(self, status: str, stop_reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.stop_reason, self.message = status, stop_reason, message


def call_key(name: str, arguments: dict[str, Any]) -> str:
    return name + json.dumps(arguments, sort_keys=True, default=str)


def estimated_tokens(text: str) -> int:
    """At least as many tokens as a provider counts for `text`, without its tokenizer: tokenizers in use make
    about four characters of English (three of JSON or code) one token, and seldom more than one token of a
    character outside ASCII (CJK, emoji); so a third of a token per ASCII character and one per other."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // 3) + (len(text) - ascii_chars)


def prompt_text(messages: Sequence[Message], tools: Sequence[Any] = ()) -> str:
    """What a model call sends, as text to estimate its size: every message with its calls, and every tool's
    name, description and schema."""
    parts: list[Any] = [[message.role, message.content, [[call.name, call.arguments] for call in message.tool_calls]]
                        for message in messages]
    parts += [[tool.name, tool.description, dict(tool.parameters)] for tool in tools]
    return json.dumps(parts, default=str, ensure_ascii=False)


class Limits:
    """`members` is what the members this run asked (and those they asked) used: a tree of runs shares its
    top run's limits (assistant/society/budget.py), so their use counts here too."""

    def __init__(self, run: AgentRun, members: Usage | None = None) -> None:
        self.run = run
        self.members = members or Usage()

    def before_model_call(self, steps: list[AgentStep], prompt: Sequence[Message] = (), tools: Sequence[Any] = (),
                          *, continues: bool = True) -> None:
        """Before a model call that sends `prompt` and offers `tools`: the limits, and whether the call fits in
        what is left of the token budget. `continues`: the prompt is the run's conversation so far (a tool-loop
        call), which only grows; a summary is another prompt, estimated from its text."""
        model_calls = self.members.model_calls + sum(1 for step in steps if step.kind == Kind.MODEL_CALL)
        limit = int(run_setting(self.run, "MAX_MODEL_CALLS"))
        if model_calls >= limit:
            raise StopRun(Status.FAILED, AgentRun.StopReason.MAX_MODEL_CALLS,
                          f"The assistant stopped: it reached its limit of {limit} model calls for one request.")
        tokens = self.members.tokens + sum(step.prompt_tokens + step.completion_tokens for step in steps)
        token_limit = int(run_setting(self.run, "MAX_TOKENS_PER_RUN"))
        # A limit that is what was left of the person's allowance says so, and when it resets.
        allowance = allowance_stop_words(self.run.config)
        if tokens >= token_limit:
            raise StopRun(Status.FAILED, AgentRun.StopReason.ALLOWANCE if allowance else AgentRun.StopReason.MAX_TOKENS,
                          allowance or f"The assistant stopped: it used its budget of {token_limit} tokens for one "
                          "request.")
        # A call that might pass the budget is not made, so a run (and a tree, whose members share it) stays
        # within it: the call is predicted from what it will send, plus the most it may write.
        predicted = self.predicted_call_tokens(steps, prompt, tools, continues=continues)
        if tokens + predicted > token_limit:
            raise StopRun(Status.FAILED, AgentRun.StopReason.ALLOWANCE if allowance else AgentRun.StopReason.MAX_TOKENS,
                          allowance or f"The assistant stopped: another model call would pass its budget of "
                          f"{token_limit} tokens for one request.")
        # Staff may have lowered the person's allowance since the run was given its share: it keeps to what is
        # left now.
        lowered = allowance_now(self.run, tokens)
        if lowered is not None and tokens + predicted > lowered[0]:
            raise StopRun(Status.FAILED, AgentRun.StopReason.ALLOWANCE, lowered[1])

    @staticmethod
    def predicted_call_tokens(steps: list[AgentStep], prompt: Sequence[Message], tools: Sequence[Any], *,
                              continues: bool) -> int:
        """The most a model call sending `prompt` may cost. Its prompt: when it continues the conversation, the
        previous call's prompt and answer as the provider counted them (the answer is in this prompt now) plus
        what came back since (the tools' results), estimated; otherwise the whole prompt, estimated. Its answer:
        as long as the model may write (MAX_OUTPUT_TOKENS), or as the longest this run's model has written, if
        longer (a provider that does not keep to the cap)."""
        calls = [step for step in steps if step.kind == Kind.MODEL_CALL]
        last = calls[-1] if calls else None
        if continues and last is not None and last.prompt_tokens:
            since = [json.dumps(step.result, default=str, ensure_ascii=False)
                     for step in steps if step.seq > last.seq and step.kind == Kind.TOOL_CALL]
            sent = last.prompt_tokens + last.completion_tokens + estimated_tokens("".join(since))
        else:
            sent = estimated_tokens(prompt_text(prompt, tools))
        written = max([int(assistant_settings.MAX_OUTPUT_TOKENS), *(step.completion_tokens for step in calls)])
        return sent + written

    def before_tool_call(self, steps: list[AgentStep], name: str, arguments: dict[str, Any], *,
                         also_starting: int = 0) -> None:
        """`also_starting`: calls of the same answer that start together with this one, before it."""
        tool_steps = [step for step in steps if step.kind == Kind.TOOL_CALL]
        limit = int(run_setting(self.run, "MAX_TOOL_CALLS"))
        if self.members.tool_calls + len(tool_steps) + also_starting >= limit:
            raise StopRun(Status.FAILED, AgentRun.StopReason.MAX_TOOL_CALLS,
                          f"The assistant stopped: it reached its limit of {limit} tool calls for one request.")
        repeats = int(run_setting(self.run, "MAX_IDENTICAL_TOOL_CALLS"))
        key = call_key(name, arguments)
        recent = [call_key(step.tool_name, step.arguments) for step in tool_steps[-(repeats - 1):]]
        if repeats > 1 and len(recent) == repeats - 1 and all(previous == key for previous in recent):
            raise StopRun(Status.FAILED, AgentRun.StopReason.REPEATED_TOOL_CALL,
                          f"The assistant stopped: it asked for the same action ({name}) {repeats} times in a row.")

    def check_wall_time(self) -> None:
        """Time spent waiting for a person does not count: the clock restarts when they answer."""
        limit = float(run_setting(self.run, "MAX_WALL_SECONDS"))
        started = self.run.clock_started_at or self.run.started_at or self.run.created_at
        if (timezone.now() - started).total_seconds() > limit:
            raise StopRun(Status.TIMED_OUT, AgentRun.StopReason.WALL_TIME,
                          f"The assistant ran out of time ({limit:.0f} s) for this request.")
