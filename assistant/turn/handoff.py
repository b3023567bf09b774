"""Handing work to members, from the turn of the run that asks, and hearing back.

A call of a delegation tool (`ask_<member>`, assistant/society/offer.py) is one tool step of the asking
run. Starting it writes, in one transaction: the step (`started`) and the member's child run (queued, its
budget reserved from what the asking run has left, `lifecycle.run_child_start`). Every delegation of one
model answer starts together, so their reservations share what is left before any of them spends it.

The child works like any run (a worker claims it, it is checkpointed step by step, fenced by its own
lease, resumed after a crash). The worker of the asking run works on the first member at once, still
holding the asker; when the members have ended, the asker's steps are finished with what each answered,
as data — its reply, or an escalation that says why it could not go on. While a member waits for the
person, or works in another worker, the asker pauses instead (`awaiting_members`, holding no worker), and
the end of its last working member wakes it (`run_parent_wake` in assistant/runs/lifecycle.py: back on the
queue). A crash between any two of these writes loses nothing: a step `started` with a child is never
"unknown" (the child's row says what happened), and the sweeper wakes a paused asker whose members all
ended.

A handoff: when the model asks one member alone (the whole of its answer) and the asking spec lets it (its
`handoff`, unless the model asks for the answer back with `return_answer`; never while a plan has other steps to
do), the member's answer is the asking run's reply, word for word: the asking run makes no further model call
(`handed_over_answer`). The member writes it for whoever its asker answers, so when that is the person (the top
run, or a member handing over in turn) its text streams to the person as the reply (`answers_person` in its
settings). An answer that does not come (the member could not finish, or its last action failed) goes back to the
asking model as data, as any answer does, and the model decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from assistant.llm import ToolCall
from assistant.models import AgentRun, AgentStep
from assistant.runs.lifecycle import DelegationRefused, run_child_start, run_path_stop_requested
from assistant.society.budget import Usage
from assistant.society.offer import DelegationTool
from assistant.society.outcome import ANSWERED, ESCALATED, REFUSED, HandedOver, member_outcome
from assistant.tools.validation import validate_arguments
from assistant.turn.journal import StepJournal

Status = AgentRun.Status
Kind = AgentStep.Kind
State = AgentStep.State



#: What a delegation step's `result` keeps from its start once its member has answered.
KEPT_ON_ANSWER = ("hands_over",)


@dataclass(frozen=True)
class Delegation:
    """One delegation call of a model answer, with the tool it calls and the step it has (if any), and whether the
    member's answer is to be the asking run's reply (`hands_over`)."""

    call: ToolCall
    tool: DelegationTool
    step: AgentStep | None
    hands_over: bool = False




def child_run_id(step: AgentStep) -> int | None:
    """The member run a delegation step started, or None for any other step."""
    value = (step.result or {}).get("child_run_id") if step.kind == Kind.TOOL_CALL else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_waiting_on_member(step: AgentStep) -> bool:
    """A delegation step whose member has not answered yet: never an interrupted tool (its child's row says
    what happened)."""
    return step.state == State.STARTED and child_run_id(step) is not None


def member_task(arguments: dict[str, Any]) -> str:
    """What the member is asked: the task the model wrote, and the context it chose to pass, if any."""
    task = arguments["task"].strip()
    context = (arguments.get("context") or "").strip()
    return f"{task}\n\nContext from the conversation that asked you:\n{context}" if context else task


def _argument_problem(tool: DelegationTool, arguments: Any) -> str | None:
    if not isinstance(arguments, dict):
        return "The arguments were not a JSON object; send them again as one."
    errors = validate_arguments(arguments, dict(tool.parameters))
    if not errors and not arguments["task"].strip():
        errors = {"task": "must say what the member should do"}
    if errors:
        return "Invalid arguments: " + "; ".join(f"{name}: {error}" for name, error in errors.items())
    return None


def delegations_start(journal: StepJournal, delegations: Sequence[Delegation]) -> list[int]:
    """Start the members of these delegation calls (none started yet), in one transaction. Returns the
    child runs started (queued: the caller works on them or hands them to workers); a delegation that
    cannot start (bad arguments, refused) has its step finished saying why, and starts nothing."""
    run = journal.run
    started: list[int] = []
    with transaction.atomic():
        # First, before this transaction locks anything else: a Stop sent for any run above (or of) this one
        # means nothing of it begins, not even the asking steps; one sent while this commits finds the new
        # members and stops them (see run_path_stop_requested).
        if run_path_stop_requested(run):
            journal.cancelled.set()
            return []
        for index, delegation in enumerate(delegations):
            call, tool = delegation.call, delegation.tool
            step = journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name, call_id=call.id,
                               arguments=call.arguments)
            problem = _argument_problem(tool, call.arguments)
            if problem is not None:
                journal.finish_step(step, {"status": "invalid", "took_effect": False, "member": tool.member,
                                           "reason": problem})
                continue
            kept = {"hands_over": True} if delegation.hands_over else {}
            try:
                child = run_child_start(parent=run, spec=tool.member, task=member_task(call.arguments),
                                        sharing=len(delegations) - index, asked_in=step,
                                        hands_over=delegation.hands_over)
            except DelegationRefused as refused:
                journal.finish_step(step, {"status": REFUSED, "took_effect": False, "member": tool.member,
                                           "reason": refused.message, **kept})
                continue
            step.result = {"status": "asked", "member": tool.member, "child_run_id": child.pk, **kept}
            journal.save(step, "result")
            started.append(child.pk)
    return started


def delegations_collect(journal: StepJournal, steps: Sequence[AgentStep]) -> bool:
    """Finish the delegation steps whose members have ended, with what each answered. Returns False when a
    member is still at work: the asking run is then paused (`awaiting_members`) until it ends."""
    while True:
        waiting = {child_run_id(step): step for step in steps if is_waiting_on_member(step)}
        if not waiting:
            return True
        children = AgentRun.objects.filter(pk__in=list(waiting)).in_bulk()
        still_working = False
        for child_id, step in waiting.items():
            child = children.get(child_id)
            if child is None:  # deleted by staff with its tree: nothing to wait for
                journal.finish_step(step, {"status": ESCALATED, "took_effect": None, "member": "",
                                           "reason": "The member's run no longer exists; what it did is unknown."})
            elif child.is_active:
                still_working = True
            else:
                kept = {key: (step.result or {})[key] for key in KEPT_ON_ANSWER if key in (step.result or {})}
                journal.finish_step(step, {**member_outcome(child), **kept}, child.duration_ms)
        if not still_working:
            return True
        if journal.await_members():
            return False
        if journal.cancelled.is_set():
            return True  # the person stopped the run: the turn's next boundary ends it (and its members)
        # The last of them ended between the read above and the pause: read them again.



def handed_over_answer(steps: Sequence[AgentStep]) -> HandedOver | None:
    """The member's answer that is the run's reply: when the run's latest calls were one delegation that hands
    over, and its member answered. None otherwise (no such call, or the member could not finish: its outcome is
    then the model's to read)."""
    last_model = max((step.seq for step in steps if step.kind == Kind.MODEL_CALL), default=0)
    latest = [step for step in steps if step.seq > last_model and step.kind == Kind.TOOL_CALL]
    if len(latest) != 1 or latest[0].state != State.FINISHED:
        return None
    outcome = latest[0].result or {}
    writer, member = outcome.get("written_by_run"), outcome.get("written_by")
    if not outcome.get("hands_over") or outcome.get("status") != ANSWERED or not isinstance(writer, int):
        return None
    return HandedOver(str(outcome.get("answer") or ""), writer, str(member or ""))


def members_used(steps: Sequence[AgentStep]) -> Usage:
    """What the members a run asked (and those they asked) used, from its finished delegation steps (each
    outcome says, see `member_outcome`): it counts inside the run's own limits."""
    used = Usage()
    for step in steps:
        spent = (step.result or {}).get("used") if step.kind == Kind.TOOL_CALL else None
        if step.state == State.FINISHED and isinstance(spent, dict):
            used += Usage(int(spent.get("model_calls") or 0), int(spent.get("tool_calls") or 0),
                          int(spent.get("tokens") or 0))
    return used


