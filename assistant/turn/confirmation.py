"""When a tool call waits for the person, and what their answer means.

A tool offered with `confirm` (declared `confirm=True`, or destructive under the `standard` profile)
is not run until the person approved that very step: the run pauses with the step showing the tool and
its arguments, and what runs after an approval is the step's own arguments. A confirm names the step it
answers (see `services.run_confirm`), so an answer can never land on another call.
"""

from __future__ import annotations

import enum
from typing import Any

from assistant.models import AgentStep
from assistant.tools import Tool

QUESTION = "Waiting for your approval."
DECLINED_REASON = "The user declined this action. Do not try it again; ask what they want instead."


class Decision(enum.Enum):
    RUN = "run"  # no question needed, or the person approved this step
    ASK = "ask"  # pause the run until the person answers this step
    DECLINE = "decline"  # the person said no: tell the model, run nothing


def decide(tool: Tool | None, step: AgentStep | None) -> Decision:
    """What to do with a call of `tool` whose step (if it has one yet) is `step`."""
    if tool is None or not tool.confirm:
        return Decision.RUN  # an unknown or unoffered tool is refused by the executor, which checks again
    if step is None or step.confirmation == "":
        return Decision.ASK
    if step.confirmation == AgentStep.Confirmation.DENIED:
        return Decision.DECLINE
    return Decision.RUN


def declined_outcome() -> dict[str, Any]:
    return {"status": "declined", "took_effect": False, "reason": DECLINED_REASON}
