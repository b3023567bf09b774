"""The limits of one run (the run keeps the settings it was queued under, see `run_setting`): model calls,
tokens, tool calls, the same call asked for again and again, and working time. Each ends the run with its
own `stop_reason` and a sentence the person reads."""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from assistant.lifecycle import run_setting
from assistant.models import AgentRun, AgentStep
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


class Limits:
    """`members` is what the members this run asked (and those they asked) used: a tree of runs shares its
    top run's limits (assistant/society/budget.py), so their use counts here too."""

    def __init__(self, run: AgentRun, members: Usage | None = None) -> None:
        self.run = run
        self.members = members or Usage()

    def before_model_call(self, steps: list[AgentStep]) -> None:
        model_calls = self.members.model_calls + sum(1 for step in steps if step.kind == Kind.MODEL_CALL)
        limit = int(run_setting(self.run, "MAX_MODEL_CALLS"))
        if model_calls >= limit:
            raise StopRun(Status.FAILED, "max_model_calls",
                          f"The assistant stopped: it reached its limit of {limit} model calls for one request.")
        tokens = self.members.tokens + sum(step.prompt_tokens + step.completion_tokens for step in steps)
        token_limit = int(run_setting(self.run, "MAX_TOKENS_PER_RUN"))
        if tokens >= token_limit:
            raise StopRun(Status.FAILED, "max_tokens",
                          f"The assistant stopped: it used its budget of {token_limit} tokens for one request.")
        # The next call sends at least what the last one did (the conversation only grows): one that would
        # pass the budget is not made, so a run (and a tree, whose members share it) stays within it.
        last = next((step for step in reversed(steps) if step.kind == Kind.MODEL_CALL), None)
        if last is not None and tokens + last.prompt_tokens + last.completion_tokens > token_limit:
            raise StopRun(Status.FAILED, "max_tokens",
                          f"The assistant stopped: another model call would pass its budget of {token_limit} "
                          "tokens for one request.")

    def before_tool_call(self, steps: list[AgentStep], name: str, arguments: dict[str, Any], *,
                         also_starting: int = 0) -> None:
        """`also_starting`: calls of the same answer that start together with this one, before it."""
        tool_steps = [step for step in steps if step.kind == Kind.TOOL_CALL]
        limit = int(run_setting(self.run, "MAX_TOOL_CALLS"))
        if self.members.tool_calls + len(tool_steps) + also_starting >= limit:
            raise StopRun(Status.FAILED, "max_tool_calls",
                          f"The assistant stopped: it reached its limit of {limit} tool calls for one request.")
        repeats = int(run_setting(self.run, "MAX_IDENTICAL_TOOL_CALLS"))
        key = call_key(name, arguments)
        recent = [call_key(step.tool_name, step.arguments) for step in tool_steps[-(repeats - 1):]]
        if repeats > 1 and len(recent) == repeats - 1 and all(previous == key for previous in recent):
            raise StopRun(Status.FAILED, "repeated_tool_call",
                          f"The assistant stopped: it asked for the same action ({name}) {repeats} times in a row.")

    def check_wall_time(self) -> None:
        """Time spent waiting for a person does not count: the clock restarts when they answer."""
        limit = float(run_setting(self.run, "MAX_WALL_SECONDS"))
        started = self.run.clock_started_at or self.run.started_at or self.run.created_at
        if (timezone.now() - started).total_seconds() > limit:
            raise StopRun(Status.TIMED_OUT, "wall_time",
                          f"The assistant ran out of time ({limit:.0f} s) for this request.")
