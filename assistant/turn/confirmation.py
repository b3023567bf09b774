"""When a tool call waits for the person, and what their answer means.

A tool offered with `confirm` (declared `confirm=True`, or destructive under the `standard` profile)
is not run until the person approved that very step (assistant/turn/calls.py: ApprovalRequired): the run
pauses with the step showing the tool and its arguments, and what runs after an approval is the step's own
arguments. A confirm names the step it
answers (see `services.run_confirm`), so an answer can never land on another call.

Containment: once a run has read text written by anyone but the person (its `others_text`, see
assistant/tools/provenance.py), every write it asks for waits for the person the same way, on a card that
says whose text it read and shows every argument of what would be written, whatever the model says. Its
spec's `containment` may refuse such writes instead, or (for a spec that never meets other people's text)
let them be; a destructive call asks whatever the spec says. Reads stay free (calls.py: Contained).
"""

from __future__ import annotations

from typing import Any

from assistant.models import AgentStep
from assistant.tools import Tool
from assistant.tools.provenance import describe

QUESTION = "Waiting for your approval."
DECLINED_REASON = "The user declined this action. Do not try it again; ask what they want instead."


def contained(tool: Tool | None, others_text: list[dict[str, Any]], policy: str) -> bool:
    """Whether a call of `tool` must wait for the person because the run read text written by someone else:
    any write, under the `approve` policy; a destructive one under any policy that lets it run."""
    if tool is None or not others_text or tool.kind != "write":
        return False
    return policy != "allow" or tool.destructive


def declined_outcome() -> dict[str, Any]:
    return {"status": "declined", "took_effect": False, "reason": DECLINED_REASON}


def containment_card(others_text: list[dict[str, Any]]) -> dict[str, Any]:
    """What a step waiting because of containment records: why, in words, and whose text was read."""
    return {"why": f"The assistant read {describe(others_text)} before this.", "others_text": others_text}


#: How the reason of a write refused by containment begins (the `refuse` policy): the dashboard counts them by it.
REFUSED_REASON_START = "This assistant takes no action after reading text someone else wrote"


def refused_outcome(others_text: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "denied", "took_effect": False,
            "reason": f"{REFUSED_REASON_START} "
                      f"({describe(others_text)}). Nothing was done; tell the person what you would have done, "
                      "for them to do it themselves."}


def read_in(step: AgentStep) -> list[dict[str, Any]]:
    """The text by others a finished step's outcome carried (a read's, a view's, a member's answer), each
    source marked with the step that read it."""
    if step.kind != AgentStep.Kind.TOOL_CALL or step.state != AgentStep.State.FINISHED:
        return []
    carried = (step.result or {}).get("others_text") if isinstance(step.result, dict) else None
    if not isinstance(carried, list):
        return []
    return [{**source, "step": source.get("step", step.seq)} for source in carried if isinstance(source, dict)]
