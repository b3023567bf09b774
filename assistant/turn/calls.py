"""The calls a model's answer asks for, and what stands between each call and its effect.

Every call goes through one interface, `Toolset.call`: a toolset owns each kind of call — the app's tools and
reads (`AppTools`), the plan (`PlanCalls`), the members a run may ask (`MemberCalls`), calls that cannot run as
sent (`Unfit`) — and what decides whether a call runs is a wrapper around the toolset that runs it, in the order
a call meets them (`calls_for` builds the stack):

    Limited → Replayed (an eval's replay) → Contained → ApprovalRequired → AppTools

`Limited` holds the run's limits before anything is recorded; `Replayed` answers from the recording and so
waits for nobody; `Contained` asks the person before any write once the run has read text someone else wrote
(or refuses it, as the spec says; assistant/tools/provenance.py); `ApprovalRequired` asks before a tool that
asks first. Each records its answer on the call's step, so the turn (loop.py) walks the answer's calls and
never branches on their kind.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from assistant.access.authority import RunAuthority, SessionEnded
from assistant.channel_policies import RecordedAnswers
from assistant.live.cards import step_card
from assistant.llm import ToolCall
from assistant.models import AgentPlan, AgentRun, AgentStep
from assistant.plans.offer import PLAN_TOOL, PlanTool
from assistant.plans.record import needs_approval, new_revision, plan_refused_outcome, plan_summary, planned_outcome
from assistant.runs.lifecycle import not_run_outcome, run_setting
from assistant.runs.model_output import storable_json
from assistant.society.offer import RETURN_ANSWER, DelegationTool
from assistant.tools import Tool, execute_tool
from assistant.tools.describe import describe_call
from assistant.tools.validation import changed_values, validate_arguments
from assistant.tracing import span
from assistant.tracing.conventions import tool_answered, tool_span
from assistant.turn.confirmation import (
    QUESTION,
    contained,
    containment_card,
    declined_outcome,
    refused_outcome,
)
from assistant.turn.handoff import (
    Delegation,
    delegations_collect,
    delegations_start,
    is_waiting_on_member,
    members_used,
)
from assistant.turn.journal import StepJournal
from assistant.turn.limits import Limits

Kind = AgentStep.Kind
State = AgentStep.State
Confirmation = AgentStep.Confirmation
#: A plan's steps not done yet: a member may answer for the run only when at most its own step is left.
PLAN_STEPS_TO_DO = (AgentPlan.Status.PENDING, AgentPlan.Status.IN_PROGRESS)

NOT_A_JSON_OBJECT = "The arguments were not a JSON object; send them again as one."


@dataclass(frozen=True)
class PendingCall:
    """A tool call of the latest model answer that has no finished step yet, with the step it has."""

    call: ToolCall
    step: AgentStep | None
    problem: str | None  # why it cannot run as sent (see model_output.recorded_calls)

    @property
    def fit(self) -> bool:
        return self.problem is None and self.call.invalid_arguments is None


class Next(enum.Enum):
    """What the turn does after a call."""

    ON = "on"  # the call has its outcome: on to the answer's next call
    PAUSED = "paused"  # the run waits (for the person's answer, or for the members it asked)
    AGAIN = "again"  # the answer's calls were handled together: read what is still pending again


class Turn(Protocol):
    """What a toolset needs of the turn it serves (assistant/turn/loop.py)."""

    run: AgentRun
    config: dict[str, Any]
    journal: StepJournal
    limits: Limits
    user: Any
    authority: RunAuthority
    tools: dict[str, Tool]
    delegations: dict[str, DelegationTool]
    planner: PlanTool | None
    work_on_member: Callable[[int], None] | None
    enqueue: Callable[[int], None] | None

    @property
    def steps(self) -> list[AgentStep]: ...

    @property
    def cancelled(self) -> bool: ...

    def check_cancel(self) -> None: ...

    def others_text(self) -> list[dict[str, Any]]: ...


def record_outcome(turn: Turn, step: AgentStep | None, call: ToolCall, outcome: dict[str, Any],
                   started: float | None = None) -> None:
    """A call's outcome on its step (made now if it has none)."""
    if step is None:
        step = turn.journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name, call_id=call.id,
                                arguments=call.arguments)
    duration = int((time.monotonic() - started) * 1000) if started is not None else None
    # Staged: written with the next call's start, or before the next model call, whichever comes first.
    turn.journal.finish_step(step, outcome, duration, stage=True)


def changed_by_person(step: AgentStep) -> dict[str, Any]:
    """What the model is told when the person changed the call's values before approving it: each value it asked
    for and the one that ran (approve with changes), so it does not say or do what it asked as if it had run."""
    asked = step.asked_arguments
    if not isinstance(asked, dict):
        return {}
    changes = changed_values(asked, step.arguments or {})
    return {"changed_by_person": changes} if changes else {}


class Toolset:
    """The calls of one kind: `owns` says which, `call` makes one (or, for a kind handled together, all of
    the answer's)."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    def owns(self, item: PendingCall) -> bool:
        raise NotImplementedError

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        raise NotImplementedError


class Wrapper(Toolset):
    """What stands between a call and the toolset that runs it: owns what that toolset owns."""

    def __init__(self, inner: Toolset) -> None:
        super().__init__(inner.turn)
        self.inner = inner

    def owns(self, item: PendingCall) -> bool:
        return self.inner.owns(item)


class Calls(Toolset):
    """The toolsets of a turn, each call going to the first that owns it."""

    def __init__(self, turn: Turn, toolsets: Sequence[Toolset]) -> None:
        super().__init__(turn)
        self.toolsets = list(toolsets)

    def owns(self, item: PendingCall) -> bool:
        return any(toolset.owns(item) for toolset in self.toolsets)

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        return next(toolset for toolset in self.toolsets if toolset.owns(item)).call(item, pending)


# --- what runs ---------------------------------------------------------------------------------------------


class Unfit(Toolset):
    """Calls that cannot run as the model sent them (a malformed or duplicate call, arguments that are not an
    object): their step says why, and nothing runs."""

    def owns(self, item: PendingCall) -> bool:
        return not item.fit

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        reason = item.problem if item.problem is not None else NOT_A_JSON_OBJECT
        record_outcome(self.turn, item.step, item.call, {"status": "invalid", "took_effect": False, "reason": reason})
        return Next.ON


class AppTools(Toolset):
    """The app's view tools and reads, fired as the person through the executor (assistant/tools/). An unknown
    or unoffered name is refused by the executor, which checks everything again."""

    def owns(self, item: PendingCall) -> bool:
        return item.fit

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        turn, call, existing = self.turn, item.call, item.step
        step = existing or turn.journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name,
                                            call_id=call.id, arguments=call.arguments)
        if existing is not None:
            step.state = State.STARTED
            turn.journal.save(step, "state")
        if turn.cancelled:
            # The `started` write read the person's Stop: the tool does not run, and its step says so.
            approved = True if step.confirmation == Confirmation.APPROVED else None
            turn.journal.finish_step(step, not_run_outcome(stop_reason=AgentRun.StopReason.CANCELLED,
                                                           approved=approved))
            turn.check_cancel()
        started = time.monotonic()
        name, attributes = tool_span(name=step.tool_name, call_id=step.call_id, arguments=step.arguments)
        # The tool's request goes through the site's middleware inside this span: what the site traces of it
        # (its Django request, its queries) is part of the call.
        with span(name, attributes) as traced:
            # What runs is the step's own record: exactly what the person saw and, if asked, approved.
            outcome = execute_tool(
                turn.user, step.tool_name, step.arguments,
                spec=turn.config.get("spec"), profile=turn.config.get("permission_profile") or None,
                sent_from=turn.authority.sent_from,
            )
            if outcome.status == "error":
                traced.failed("tool_error", outcome.reason)
            answer = outcome.to_model()
            traced.set(tool_answered(answer))
        # The tool's card of what it did, drawn as the person sees the object now (assistant/live/cards.py).
        step.card = step_card(turn.user, step.tool_name, outcome, sent_from=turn.authority.sent_from)
        record_outcome(turn, step, call, {**answer, **changed_by_person(step)}, started=started)
        if outcome.session_ended:
            raise SessionEnded()
        return Next.ON


class PlanCalls(Toolset):
    """The model says (or revises) its plan: a new revision the run follows from now on, and the tool step
    that made it, whose result is the plan as recorded (assistant/plans/). A plan the spec wants approved
    first waits on that step, as a call that asks first does; a replay's plan is followed as an approved one
    would be (it waits for nobody)."""

    def __init__(self, turn: Turn, *, replaying: bool) -> None:
        super().__init__(turn)
        self.replaying = replaying

    def owns(self, item: PendingCall) -> bool:
        return self.turn.planner is not None and item.call.name == PLAN_TOOL and item.fit

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        turn, call, step = self.turn, item.call, item.step
        if step is not None and step.state == State.AWAITING_CONFIRMATION:
            if not step.confirmation:
                return Next.PAUSED  # still waiting (a run taken up again before the person answered)
            self._answered(step)
            return Next.ON
        assert turn.planner is not None  # (owns)
        errors = validate_arguments(call.arguments, dict(turn.planner.parameters))
        if errors:
            step = step or turn.journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name,
                                            call_id=call.id, arguments=call.arguments)
            turn.journal.finish_step(step, {"status": "invalid", "took_effect": False, "reason": "Invalid plan: " +
                                            "; ".join(f"{name}: {error}" for name, error in errors.items())})
            return Next.ON
        plan = new_revision(
            turn.run, turn.journal.plan, call.arguments, made_in=None,
            members={name: tool.member for name, tool in turn.delegations.items()},
            notes={tool.member: tool.annotation for tool in turn.delegations.values()},
        )
        destructive = [name for name, tool in turn.tools.items() if tool.destructive]
        if not self.replaying and needs_approval(plan.steps, policy=str(run_setting(turn.run, "PLAN_APPROVAL")),
                                                 destructive=destructive):
            # The card says the plan in words; an answer names this step, so it answers this revision only.
            summary = plan_summary(plan.steps, destructive=destructive)
            if step is None:
                step = turn.journal.add(kind=Kind.TOOL_CALL, state=State.AWAITING_CONFIRMATION, reason=QUESTION,
                                        summary=summary, tool_name=call.name, call_id=call.id,
                                        arguments=call.arguments)
            plan.made_in, plan.approval = step, AgentPlan.Approval.WAITING
            turn.journal.write_plan(plan)
            turn.journal.pause(turn.planner, step, summary=summary)
            return Next.PAUSED
        step = step or turn.journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name,
                                        call_id=call.id, arguments=call.arguments)
        plan.made_in = step
        turn.journal.write_plan(plan)
        turn.journal.finish_step(step, planned_outcome(plan))
        return Next.ON

    def _answered(self, step: AgentStep) -> None:
        """The person answered the plan waiting on `step`: approved, the run follows it; declined, nothing of
        it is done; commented, the model is to revise it as they said (and ask again)."""
        journal = self.turn.journal
        plan = journal.plan
        if plan is None or plan.made_in_id != step.pk:  # the plan went with its run's rows: nothing to follow
            journal.finish_step(step, {"status": "invalid", "took_effect": False,
                                       "reason": "The plan this answers is gone."})
            return
        if step.confirmation == Confirmation.APPROVED:
            journal.finish_step(step, {**planned_outcome(plan), "approved": True})
            return
        commented = plan.approval == AgentPlan.Approval.COMMENTED
        journal.close_plan(why="You asked for changes to this plan." if commented else "You declined this plan.")
        journal.finish_step(step, plan_refused_outcome(plan, commented=commented))


class MemberCalls(Toolset):
    """The members a run asks (assistant/society/): every delegation of an answer starts at once, so their
    budgets are reserved together before any of them works; the run hears back from them together."""

    def owns(self, item: PendingCall) -> bool:
        return item.call.name in self.turn.delegations and item.fit

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        turn = self.turn
        waiting = [each.step for each in pending if each.step is not None and is_waiting_on_member(each.step)]
        if waiting:
            heard = delegations_collect(turn.journal, waiting)
            if heard:
                turn.limits.members = members_used(turn.steps)
            return Next.AGAIN if heard else Next.PAUSED
        fresh = [each for each in pending if each.step is None and self.owns(each)]
        turn.others_text()  # a member starts having read what its asker read (run_child_start copies it)
        for index, each in enumerate(fresh):
            turn.limits.before_tool_call(turn.steps, each.call.name, each.call.arguments, also_starting=index)
        hands_over = self._may_hand_over(pending)
        started = delegations_start(turn.journal, [
            Delegation(each.call, turn.delegations[each.call.name], None, hands_over=hands_over) for each in fresh
        ])
        if started:
            first, *others = started
            for other in others:
                if turn.enqueue is not None:
                    turn.enqueue(other)
                elif turn.work_on_member is not None:
                    turn.work_on_member(other)
            # This run keeps its lease meanwhile: when the member ends, it goes on at once, with what it has
            # loaded. Should the member wait for the person, or the others still work, it pauses next.
            if turn.work_on_member is not None:
                turn.work_on_member(first)
        return Next.AGAIN

    def _may_hand_over(self, pending: Sequence[PendingCall]) -> bool:
        """Whether a member asked alone (the one call of the model's answer, or of the routing) is to answer for
        this run (a handoff): its spec lets it, the model did not ask for the answer back, and no other step of
        the run's plan is still to do."""
        last = next((step for step in reversed(self.turn.steps) if step.kind == Kind.MODEL_CALL), None)
        calls = (last.result or {}).get("tool_calls") if last is not None else None
        if len(calls or pending) != 1 or len(pending) != 1:
            return False
        if str(run_setting(self.turn.run, "HANDOFF")) != "auto" or pending[0].call.arguments.get(RETURN_ANSWER) is True:
            return False
        plan = self.turn.journal.plan
        return plan is None or sum(1 for step in plan.steps if step["status"] in PLAN_STEPS_TO_DO) <= 1


# --- what stands between a call and its effect -------------------------------------------------------------


class Limited(Wrapper):
    """A new call is counted against the run's limits (and the repeated-call rule) before anything of it is
    recorded: past them the run stops (StopRun)."""

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        if item.step is None:
            self.turn.limits.before_tool_call(self.turn.steps, item.call.name, item.call.arguments)
        return self.inner.call(item, pending)


class Replayed(Wrapper):
    """A run whose channel answers its calls from a recording (an eval's replay, assistant/evals/replay.py): each
    call is answered from it, nothing runs and nobody is asked (the recording's person answered already). A tool
    this run is not offered is refused as the executor would refuse it."""

    def __init__(self, inner: Toolset, recording: RecordedAnswers) -> None:
        super().__init__(inner)
        self.recording = recording

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        call = item.call
        if call.name not in self.turn.tools:
            outcome = {"status": "denied", "took_effect": False,
                       "reason": f"{str(call.name)[:64]} is not among this assistant's tools"}
        else:
            outcome = self.recording.answer(call.name, storable_json(call.arguments)[0])
        step = item.step
        changed = outcome.get("changed_by_person")
        if step is None and isinstance(changed, dict):
            # The recording's person approved it with changes: the replay's step holds what they approved.
            asked = storable_json(call.arguments)[0]
            approved = {**asked, **{name: change["approved"] for name, change in changed.items()}}
            step = self.turn.journal.add(kind=Kind.TOOL_CALL, state=State.STARTED, tool_name=call.name,
                                         call_id=call.id, arguments=approved, asked_arguments=asked)
        record_outcome(self.turn, step, call, outcome, started=time.monotonic())
        return Next.ON


class _AsksFirst(Wrapper):
    """A wrapper that may make a call wait for the person on its step; an answered step goes through, or is
    declined, whichever wrapper asked it."""

    def question(self, item: PendingCall, tool: Tool) -> dict[str, Any] | None | bool:
        """False: this wrapper lets the call through; True: it asks, with no more to say on the card; a dict:
        it asks, saying this on the card (the step's `containment`)."""
        raise NotImplementedError

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        tool = self.turn.tools.get(item.call.name)
        step = item.step
        if tool is None or (step is not None and step.confirmation == Confirmation.APPROVED):
            return self.inner.call(item, pending)  # the person approved this very step, with these arguments
        if step is not None and step.confirmation == Confirmation.DENIED:
            record_outcome(self.turn, step, item.call, declined_outcome())
            return Next.ON
        asked = self.question(item, tool)
        if asked is False:
            return self.inner.call(item, pending)
        ask(self.turn, tool, item, containment=asked if isinstance(asked, dict) else None)
        return Next.PAUSED


class ApprovalRequired(_AsksFirst):
    """A tool offered with `confirm` (declared so, or destructive under the profile) waits for the person's
    approval of that very step (assistant/turn/confirmation.py)."""

    def question(self, item: PendingCall, tool: Tool) -> dict[str, Any] | None | bool:
        return tool.confirm


class Contained(_AsksFirst):
    """Once the run has read text written by anyone but the person, a write waits for the person on a card that
    says whose text it read and shows what it would write; or, as the spec says, it is refused (`refuse`) or
    let through (`allow`, never for a destructive call). Reads go through."""

    def question(self, item: PendingCall, tool: Tool) -> dict[str, Any] | None | bool:
        if tool.kind != "write":
            return False
        others_text = self.turn.others_text()
        if not others_text:
            return False
        policy = str(run_setting(self.turn.run, "CONTAINMENT"))
        if policy == "refuse":
            raise _Refused(others_text)
        return containment_card(others_text) if contained(tool, others_text, policy) else False

    def call(self, item: PendingCall, pending: Sequence[PendingCall]) -> Next:
        try:
            return super().call(item, pending)
        except _Refused as refused:
            record_outcome(self.turn, item.step, item.call, refused_outcome(refused.others_text))
            return Next.ON


class _Refused(Exception):
    def __init__(self, others_text: list[dict[str, Any]]) -> None:
        super().__init__("refused")
        self.others_text = others_text


def ask(turn: Turn, tool: Tool, item: PendingCall, *, containment: dict[str, Any] | None = None) -> None:
    """Make the call wait for the person: its step (made now if it has none) shows the tool, its arguments
    exactly as stored and what it will do in words, looked up as the person; the run is released."""
    call, existing = item.call, item.step
    summary = ""
    if existing is None or not existing.summary:
        arguments = existing.arguments if existing is not None else storable_json(call.arguments)[0]
        turn.journal.flush()  # the look-up takes a moment: what happened so far is not held back
        summary = describe_call(turn.user, tool, arguments, sent_from=turn.authority.sent_from)
    turn.journal.pause(tool, existing, summary=summary, containment=containment, kind=Kind.TOOL_CALL,
                       tool_name=call.name, call_id=call.id, arguments=call.arguments)


def calls_for(turn: Turn, *, replay: RecordedAnswers | None) -> Calls:
    """Every kind of call a turn's model may ask for, each behind what stands between it and its effect."""
    app: Toolset = Contained(ApprovalRequired(AppTools(turn)))
    if replay is not None:
        app = Replayed(app, replay)
    return Calls(turn, [
        Limited(Unfit(turn)),
        Limited(PlanCalls(turn, replaying=replay is not None)),
        MemberCalls(turn),
        Limited(app),
    ])
