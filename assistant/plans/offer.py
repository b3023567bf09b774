"""The planning tool a run's model is offered (`assistant_plan`): for a request that needs more than one action,
the steps it means to take, in words and in order, each with the tool (or the member, `ask_<member>`) that
will carry it out. Calling it again revises the plan: the steps already done stay done, and the new list is
what is still to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Its name: a host's own tools are named for their app (`tracker_task_create`), so this one is the assistant's.
PLAN_TOOL = "assistant_plan"
#: A plan is short: more steps than this is a request to break up.
MAX_PLAN_STEPS = 12
MAX_STEP_CHARS = 300


@dataclass(frozen=True)
class PlanTool:
    """The planning tool as the model sees it. Asks nobody: a plan the person must approve first waits
    in the open, on its own (see record.py)."""

    name: str = PLAN_TOOL
    description: str = (
        "Before a request that needs more than one action, say your plan: the steps you will take, in order, "
        "each in a few words, with the tool (or the member, ask_<member>) that carries it out. Then follow "
        "it. When a step fails, call this again with the steps still to do (those done stay done)."
    )
    kind: str = "plan"
    destructive: bool = False
    confirm: bool = False

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array", "minItems": 0, "maxItems": MAX_PLAN_STEPS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "do": {"type": "string", "minLength": 1, "maxLength": MAX_STEP_CHARS,
                                   "description": "What this step does, for the person to read."},
                            "tool": {"type": "string", "maxLength": 200,
                                     "description": "The tool (or ask_<member>) that carries it out."},
                        },
                        "required": ["do"],
                        "additionalProperties": False,
                    },
                },
                "reason": {"type": "string", "maxLength": 1000,
                           "description": "When revising: what changed, and why."},
            },
            "required": ["steps"],
            "additionalProperties": False,
        }
