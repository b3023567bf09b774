"""A plan as the run follows it: its steps, and how each one's status follows the run's tool steps.

A plan step is `{"n", "do", "tool", "member", "member_note", "status", "step_ids", "why"}`: its number, what
it does in words, the tool (or `ask_<member>`) the model said carries it out, the member that is and what
its record says (the registry's ranking), its status, the run's tool steps that carried it out, and why it
failed or was skipped. The rules, applied as each tool step of the run starts and ends:

- a tool call goes to the first pending step that names its tool; else to the step in progress (a lookup
  on the way, say); else to the first pending step that names no tool. That step is `in_progress`;
- when the call ends, its step is `failed` if the call failed (denied, invalid, not found, a member's
  escalation, ...), `done` if it was the call the step named, and otherwise stays in progress (a step that
  names no tool is done when the next one starts, or when the run answers);
- when the run ends, a step in progress is `done` if the run answered, else `failed`; a pending one is
  `skipped`, with why. So every step of an ended run says what became of it.

A revision keeps the steps already over (done, or failed: why it was made), as they were, and numbers the new
ones after them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from assistant.infra import event_names
from assistant.live.events import publish_to_user
from assistant.live.payloads import run_event
from assistant.models import AgentPlan, AgentRun, AgentStep
from assistant.plans.offer import PLAN_TOOL

Status = AgentPlan.Status


def plan_steps(asked: Iterable[Mapping[str, Any]], *, kept: Iterable[Mapping[str, Any]] = (),
               members: Mapping[str, str] = {}, notes: Mapping[str, str] = {}) -> list[dict[str, Any]]:
    """The steps of a new revision: `kept` (the previous revision's done steps, as they were), then the
    model's `asked` steps, pending. `members` maps a delegation tool's name to its member, `notes` a
    member to what its record says."""
    steps = [dict(step) for step in kept]
    # Numbered after the highest kept: a step keeps its number in every revision it is in.
    after = max((int(step["n"]) for step in steps), default=0)
    for number, item in enumerate(asked, start=after + 1):
        tool = str(item.get("tool") or "")
        member = members.get(tool, "")
        steps.append({"n": number, "do": str(item["do"]).strip(), "tool": tool, "member": member,
                      "member_note": notes.get(member, "") if member else "", "status": Status.PENDING,
                      "step_ids": [], "why": ""})
    return steps


def new_revision(run: AgentRun, previous: AgentPlan | None, arguments: Mapping[str, Any], *,
                 made_in: AgentStep | None, members: Mapping[str, str], notes: Mapping[str, str]) -> AgentPlan:
    """The next revision of `run`'s plan (unsaved), from the planning tool's `arguments`: the previous
    revision's done steps as they were, then the steps still to do. Its reason is what the model said, or
    the failure that led to it."""
    # What is over stays as it ended: the steps done, and the one that failed (which is why this revision is).
    kept = [step for step in (previous.steps if previous is not None else [])
            if step["status"] in (Status.DONE, Status.FAILED)]
    failed = next((step for step in reversed(previous.steps) if step["status"] == Status.FAILED), None) \
        if previous is not None else None
    reason = str(arguments.get("reason") or "").strip() or (
        f"Step {failed['n']} failed: {failed['why']}" if failed is not None else "")
    return AgentPlan(run=run, revision=(previous.revision + 1) if previous is not None else 1,
                     steps=plan_steps(arguments.get("steps") or [], kept=kept, members=members, notes=notes),
                     reason=reason[:2000], made_in=made_in)


def step_started(steps: list[dict[str, Any]], step: AgentStep) -> dict[str, Any] | None:
    """The plan step `step` (a tool step that just started) belongs to, now in progress; None for none."""
    pending = [s for s in steps if s["status"] == Status.PENDING]
    working = [s for s in steps if s["status"] == Status.IN_PROGRESS]
    target = (next((s for s in pending if s["tool"] and s["tool"] == step.tool_name), None)
              or (working[0] if working else None)
              or next((s for s in pending if not s["tool"]), None))
    if target is None:
        return None
    if target["status"] == Status.PENDING:
        # The steps before it that name no tool have been done by now (said in words, carried by the model).
        for earlier in working:
            if not earlier["tool"] and earlier is not target:
                earlier["status"] = Status.DONE
        target["status"] = Status.IN_PROGRESS
    if step.pk is not None and step.pk not in target["step_ids"]:
        target["step_ids"].append(step.pk)
    return target


def step_finished(steps: list[dict[str, Any]], step: AgentStep) -> dict[str, Any] | None:
    """The plan step `step` (a tool step that just ended) belongs to, with its status now; None for none."""
    target = next((s for s in steps if step.pk in s["step_ids"]), None)
    if target is None or target["status"] != Status.IN_PROGRESS:
        return None
    if step.failed:
        target["status"] = Status.FAILED
        outcome = step.result or {}
        target["why"] = str(outcome.get("reason") or step.reason or outcome.get("status") or "")[:1000]
    elif not target["tool"] or target["tool"] == step.tool_name:
        target["status"] = Status.DONE if target["tool"] else Status.IN_PROGRESS
    return target


def steps_closed(steps: list[dict[str, Any]], *, answered: bool, why: str = "") -> bool:
    """Every step's final status once the run has ended; whether any changed."""
    changed = False
    for step in steps:
        if step["status"] == Status.IN_PROGRESS:
            step["status"] = Status.DONE if answered else Status.FAILED
            if not answered:
                step["why"] = step["why"] or why
            changed = True
        elif step["status"] == Status.PENDING:
            step["status"] = Status.SKIPPED
            step["why"] = "The assistant answered without doing this." if answered else (
                f"Not done: {why}" if why else "Not done: the run ended first.")
            changed = True
    return changed


def needs_approval(steps: Iterable[Mapping[str, Any]], *, policy: str, destructive: Iterable[str]) -> bool:
    """Does a plan with these steps wait for the person's answer first, under `policy` (a spec's
    `plan_approval`), when the tools named `destructive` are the run's destructive ones?"""
    if policy == "always":
        return True
    risky = set(destructive)
    return policy == "when_destructive" and any(
        step["status"] == Status.PENDING and step["tool"] in risky for step in steps)


def plan_summary(steps: Iterable[Mapping[str, Any]], *, destructive: Iterable[str]) -> str:
    """The plan in words, for the card that asks the person: what is still to do, one step a line; a
    destructive step says it will ask again before it runs."""
    risky = set(destructive)
    lines = [f"{step['n']}. {step['do']}" + (" — destructive: asks you again before it runs"
                                             if step["tool"] in risky else "")
             + (f" (by {step['member']})" if step["member"] else "")
             for step in steps if step["status"] == Status.PENDING]
    return "Plan:\n" + "\n".join(lines) if lines else "Plan: nothing more to do."


def planned_outcome(plan: AgentPlan) -> dict[str, Any]:
    """What the planning tool answers the model once its plan stands: the revision and its steps."""
    return {"status": "planned", "took_effect": False, "revision": plan.revision,
            "steps": [{"n": step["n"], "do": step["do"], "status": step["status"]} for step in plan.steps]}


#: What the model is told when the person did not approve its plan.
PLAN_DECLINED = "The person declined this plan: do none of it. Ask them what they want instead."
PLAN_COMMENTED = ("The person did not approve this plan and said what to change (their comment). Revise it as "
                  "they say: call assistant_plan again with the new steps, which they will be asked about again.")


def plan_refused_outcome(plan: AgentPlan, *, commented: bool) -> dict[str, Any]:
    if commented:
        return {"status": "commented", "took_effect": False, "revision": plan.revision, "comment": plan.comment,
                "reason": PLAN_COMMENTED}
    return {"status": "declined", "took_effect": False, "revision": plan.revision, "reason": PLAN_DECLINED}


def steps_dropped(steps: list[dict[str, Any]], *, why: str) -> bool:
    """Every step still to do is skipped, saying why (the person declined the plan, or asked for changes)."""
    dropped = False
    for step in steps:
        if step["status"] in (Status.PENDING, Status.IN_PROGRESS):
            step["status"], step["why"], dropped = Status.SKIPPED, why, True
    return dropped


def plan_payload(plan: AgentPlan) -> dict[str, Any]:
    """A plan revision in events and loads (docs/protocol.md)."""
    return {"id": plan.pk, "run_id": plan.run_id, "revision": plan.revision, "reason": plan.reason,
            # A copy: the event leaves after its commit, and the run goes on changing the plan meanwhile.
            "made_in": plan.made_in_id, "steps": copy.deepcopy(plan.steps),
            "approval": plan.approval, "comment": plan.comment,
            "answered_at": plan.answered_at.isoformat() if plan.answered_at else None,
            "created_at": plan.created_at.isoformat() if plan.created_at else None,
            "updated_at": plan.updated_at.isoformat() if plan.updated_at else None}


def plan_event(run: AgentRun, plan: AgentPlan) -> dict[str, Any]:
    return run_event(event_names.PLAN, run, plan=plan_payload(plan))


def run_plan(run: AgentRun) -> AgentPlan | None:
    """The plan `run` follows: its newest revision (None for a run that made none)."""
    return AgentPlan.objects.filter(run=run).order_by("-revision").first()


def run_plan_close(run: AgentRun, steps: Iterable[AgentStep]) -> None:
    """`run` has just ended (in the caller's transaction), with these `steps`: its plan's every step gets its
    final status. A run that never called the planning tool has no plan to look for."""
    if not any(step.tool_name == PLAN_TOOL for step in steps):
        return
    plan = run_plan(run)
    if plan is None:
        return
    if steps_closed(plan.steps, answered=run.status == AgentRun.Status.SUCCEEDED, why=run.error or run.stop_reason):
        plan.save(update_fields=["steps", "updated_at"])
        publish_to_user(run.owner_id, plan_event(run, plan))
