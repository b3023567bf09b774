"""The ids and JSON the AG-UI wire carries, made from the rows so that every stream and every messages snapshot
names the same things the same way (the agui/runs.py snapshot uses them too)."""

from __future__ import annotations

import json
from typing import Any

from assistant.live.events import bounded


def msg_id(run: int, seq: int) -> str:
    return f"msg-{run}-{seq}"


def call_id(run: int, seq: int) -> str:
    return f"call-{run}-{seq}"


def result_id(run: int, seq: int) -> str:
    return f"result-{run}-{seq}"


def subagent_id(run: int) -> str:
    return f"run-{run}"


def interrupt_id(step_id: int) -> str:
    return f"approval-{step_id}"


def step_name(step: dict[str, Any]) -> str:
    return f"{step['tool_name'] or step['kind']} #{step['seq']}"


def is_said_by(reply: str, model_text: str) -> bool:
    """Whether a run's reply is the text of a model call, as the client holds it: a reply is that text with the
    spaces around it taken off (the run ends with it stripped), which the person cannot tell apart."""
    return bool(reply) and reply.strip() == model_text.strip()


def as_json(value: Any) -> str:
    """A row's JSON as the wire carries it: within the panel's bounds (big integers as strings of digits)."""
    return json.dumps(bounded(value), ensure_ascii=False)
