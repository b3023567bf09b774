"""What an ended member's run answers the run that asked it, read from its rows: its reply, or an escalation that
says why it could not go on, with what it (and those it asked) did and used. Read by the asking run's turn
(assistant/turn/handoff.py) and by a run's end, for a member its asker stopped (assistant/runs/lifecycle.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assistant.models import AgentRun, AgentStep
from assistant.society.budget import Usage, subtree_run_ids

Status = AgentRun.Status
Kind = AgentStep.Kind

#: The outcome `status` of a delegation: the member answered; it could not go on (or its last action
#: failed); it could not be asked from here (too deep, already on the path, nothing left of the budget).
ANSWERED, ESCALATED, REFUSED = "answered", "escalated", "refused"
#: How many of a member's failed actions its escalation lists.
PROBLEMS_SHOWN = 5


@dataclass(frozen=True)
class HandedOver:
    """A member's answer that is the asking run's reply (a handoff): its text, the run that wrote it (however many
    members handed it on) and that run's spec."""

    reply: str
    written_by: int
    member: str


def member_outcome(child: AgentRun) -> dict[str, Any]:
    """What an ended member's run answers the run that asked it: data for its model, never an instruction.
    `answered` with its reply; `escalated` with the reason when it did not finish, or when its last action
    failed (denied, not found, invalid, …) — the asking model then decides what to do. Either way it says
    whether anything took effect, what failed, and what the member (with those it asked) used."""
    subtree = _subtree_steps(child)
    effects = _tool_steps(subtree)
    took_effect: bool | None = True if any(s.took_effect for s in effects) else (
        None if any(s.took_effect is None for s in effects) else False)
    failed = [step for step in effects if step.failed]
    problems = [{"tool": step.tool_name, "status": (step.result or {}).get("status"),
                 "reason": (step.result or {}).get("reason") or step.reason}
                for step in failed[-PROBLEMS_SHOWN:]]
    used = Usage(sum(1 for step in subtree if step.kind == Kind.MODEL_CALL), len(effects),
                 sum(step.prompt_tokens + step.completion_tokens for step in subtree))
    outcome: dict[str, Any] = {
        "member": child.spec, "child_run_id": child.pk, "took_effect": took_effect,
        "used": {"model_calls": used.model_calls, "tool_calls": used.tool_calls, "tokens": used.tokens},
    }
    own_steps = [step for step in effects if step.run_id == child.pk]
    last_failed = bool(own_steps) and own_steps[-1].failed
    if child.status == Status.SUCCEEDED and not last_failed:
        outcome.update(status=ANSWERED, answer=child.reply, written_by=child.spec, written_by_run=child.pk)
        if child.answered_by_id is not None:
            # Its answer is one a member it asked wrote (a handoff two levels down): that member is named.
            outcome.update(written_by_run=child.answered_by_id, written_by=AgentRun.objects.filter(
                pk=child.answered_by_id).values_list("spec", flat=True).first() or child.spec)
    elif child.status == Status.SUCCEEDED:
        last = own_steps[-1]
        outcome.update(status=ESCALATED, answer=child.reply, reason=(
            f"The member “{child.spec}” answered, but its last action ({last.tool_name}) failed: "
            f"{(last.result or {}).get('reason') or last.reason}"))
    else:
        why = child.error or f"it ended as {child.status}"
        outcome.update(status=ESCALATED, stop_reason=child.stop_reason or child.status,
                       reason=f"The member “{child.spec}” could not finish: {why}")
    if problems:
        outcome["problems"] = problems
    if child.others_text:
        # Its answer may carry what it read: the asker has read it too (assistant/tools/provenance.py).
        outcome["others_text"] = [{**{key: value for key, value in source.items() if key != "step"},
                                   "where": f"{child.spec}: {source.get('where') or 'its answer'}"}
                                  for source in child.others_text]
    return outcome


def _tool_steps(steps: Sequence[AgentStep]) -> list[AgentStep]:
    return [step for step in steps if step.kind == Kind.TOOL_CALL]


def subtree_effects(child: AgentRun) -> list[AgentStep]:
    """The tool steps of `child` and of every run below it so far, oldest first."""
    return _tool_steps(_subtree_steps(child))


def _subtree_steps(child: AgentRun) -> list[AgentStep]:
    """The steps of `child` and of every run below it, oldest first (one query when it asked no member; else
    one per level below, plus two)."""
    own = list(AgentStep.objects.filter(run_id=child.pk).order_by("created_at", "seq"))
    if not any((step.result or {}).get("child_run_id") for step in own if step.kind == Kind.TOOL_CALL):
        return own
    return list(AgentStep.objects.filter(run_id__in=subtree_run_ids([child.pk])).order_by("created_at", "seq"))

