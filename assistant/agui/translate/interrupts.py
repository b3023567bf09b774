"""The approvals a tree waits on, as the interrupts of an AG-UI run that ends paused: one a step that waits
for the person, with what it will do, why it is asked and what answer it expects (the protocol's resume)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt, RunFinishedEvent, RunFinishedInterruptOutcome

from assistant.agui.translate.endings import Endings
from assistant.agui.translate.state import WORKING
from assistant.agui.translate.wire import call_id, interrupt_id, subagent_id
from assistant.live.events import bounded
from assistant.plans.offer import PLAN_TOOL

#: What an approval's interrupt expects back (`resume[].payload`), as JSON Schema.
_APPROVE: dict[str, Any] = {"type": "boolean", "title": "Approve", "description": "Do this as you, now."}
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": _APPROVE,
        # Approve with changes: the action's values as the person corrected them (metadata.arguments are the
        # model's), checked as the model's would be; a value that does not fit is a RUN_ERROR and nothing runs.
        "arguments": {"type": "object", "title": "With these values",
                      "description": "Instead of the values asked for (metadata.arguments): run it with these."},
    },
    "required": ["approve"],
}
#: A plan's approval also takes the person's words instead of a yes (`approve: false` with a `comment`).
PLAN_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": _APPROVE,
                   "comment": {"type": "string", "title": "What to change",
                               "description": "Instead of approving: what the plan should do differently."}},
    "required": ["approve"],
}
TOOL_APPROVAL = "tool_approval"
PLAN_APPROVAL = "plan_approval"


def waiting_steps(runs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (run, step) pairs of the tree that wait for the person's answer, oldest first."""
    found = [(run, step) for run in runs if run["status"] == "awaiting_confirmation"
             for step in run["steps"] if step["state"] == "awaiting_confirmation" and not step["confirmation"]]
    return sorted(found, key=lambda pair: (pair[1]["created_at"] or "", pair[1]["id"]))


def paused(runs: list[dict[str, Any]]) -> bool:
    """The tree waits for the person and nothing of it works meanwhile: the AG-UI run can end interrupted."""
    return bool(runs) and not any(run["status"] in WORKING for run in runs) and bool(waiting_steps(runs))


class Interrupts(Endings):
    """The run's end as interrupts in a `Translator`, when its tree waits for the person."""

    def _interrupt(self, runs: list[dict[str, Any]], tools: dict[str, Any]) -> list[Any]:
        interrupts = []
        for run, step in waiting_steps(runs):
            key = (run["id"], step["seq"])
            is_plan = step["tool_name"] == PLAN_TOOL
            tool = tools.get(step["tool_name"]) or {}
            message = step["summary"] or f"Run {step['tool_name']}?"
            metadata = {"assistantRunId": run["id"], "stepId": step["id"], "toolName": step["tool_name"],
                        "arguments": bounded(step["arguments"]), "description": tool.get("description"),
                        "destructive": tool.get("destructive")}
            containment = step.get("containment")
            if containment:
                # Asked because the run read someone else's text: the why leads the message, so that a client
                # showing only `message` still says it, and its sources are in the metadata.
                message = f"{containment['why']} {message}"
                metadata["containment"] = {"why": containment["why"],
                                           "othersText": bounded(containment.get("others_text") or [])}
            interrupts.append(Interrupt(
                id=interrupt_id(step["id"]), reason=PLAN_APPROVAL if is_plan else TOOL_APPROVAL,
                message=message, tool_call_id=call_id(*key),
                response_schema=PLAN_APPROVAL_SCHEMA if is_plan else APPROVAL_SCHEMA,
                subagent_run_id=subagent_id(run["id"]) if run["id"] != self.top else None,
                metadata=metadata))
        ids = [interrupt.id for interrupt in interrupts]
        return self._end([RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                           outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
                                           metadata={"assistantRunId": self.top})], suspended=ids)
