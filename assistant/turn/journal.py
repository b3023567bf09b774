"""The run's record as one worker writes it: its steps, the pause for a confirmation, the reply, the end.

Every write is fenced by the lease (`assistant.runs.lease.write_fenced`): it happens only while this
worker's holder is still the run's `lease_owner`, and raises `LeaseLost` without changing anything
otherwise. Every write is then published to the run's owner, after it commits. Whatever reaches a column
or jsonb is made storable first (`model_output`), so no value can make a write fail.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from django.utils import timezone

from assistant.infra import event_names
from assistant.live.events import publish_to_user
from assistant.live.links import openable_links
from assistant.live.payloads import message_payload, run_event, run_payload
from assistant.live.threads import branch_payloads
from assistant.models import AgentChat, AgentMessage, AgentPlan, AgentRun, AgentStep
from assistant.plans.offer import PLAN_TOOL, PlanTool
from assistant.plans.record import plan_event, step_finished, step_started, steps_dropped
from assistant.runs.allowances import allowance_note
from assistant.runs.lease import Fenced, LeaseLost, insert_fenced, update_fenced, write_fenced
from assistant.runs.lifecycle import (
    CancelledBeforeEnd,
    chat_activity_record,
    run_await_members,
    run_await_person,
    run_finish,
    step_announce,
    step_outcome_set,
)
from assistant.runs.model_output import MAX_NAME_CHARS, clean_text, storable_json
from assistant.society.outcome import HandedOver
from assistant.tools import Tool
from assistant.turn.confirmation import QUESTION

Status = AgentRun.Status
Kind = AgentStep.Kind
State = AgentStep.State

_JSON_FIELDS = ("arguments", "result", "containment")
#: What the model is told with the outcome of a call whose plan step failed.
REVISE = ("This step of your plan failed. Revise the plan (call assistant_plan with the steps still to do; "
          "those done stay done) before going on, or tell the person.")
_TEXT_FIELDS = ("reason", "summary")
_NAME_FIELDS = ("tool_name", "call_id")


def _make_storable(step: AgentStep, names: tuple[str, ...] = (*_JSON_FIELDS, *_TEXT_FIELDS, *_NAME_FIELDS)) -> None:
    """Whatever of these fields reaches a column: jsonb without NUL, unpaired surrogates or NaN; text
    without NUL or unpaired surrogates; a name or id within its column's length."""
    for name in names:
        value = getattr(step, name)
        if name in _JSON_FIELDS:
            setattr(step, name, storable_json(value)[0])
        elif isinstance(value, str):
            cleaned = clean_text(value)
            setattr(step, name, cleaned[:MAX_NAME_CHARS] if name in _NAME_FIELDS else cleaned)


class StepJournal:
    """The steps of `run` as worker `holder` writes them, in order (`steps`, oldest first).

    Each write also reads the run's cancel flag (see `assistant.runs.lease.write_fenced`); once one finds it
    set, `cancelled` is set, for the turn to stop at its next boundary.

    A write the turn follows at once with another (a model's answer, then the first call it asks for; a
    tool's outcome, then the next tool's start) may be `staged`: it goes, with its event, in the statement
    and commit of the next write, or at `flush()`, which the turn calls before anything that takes time (a
    model call, a look-up for an approval card). Every other write here flushes what is staged first, so the
    record keeps its order and nothing staged is left behind by a pause or an end."""

    def __init__(self, run: AgentRun, holder: str, steps: list[AgentStep],
                 cancelled: threading.Event | None = None, plan: AgentPlan | None = None) -> None:
        self.run, self.holder, self.steps = run, holder, steps
        self.cancelled = cancelled if cancelled is not None else threading.Event()
        # The plan the run follows (assistant/plans/): its steps follow the tool steps written here.
        self.plan = plan
        # Staged writes, in order: a step to insert (fields None) or the fields of one to update.
        self._staged: list[tuple[AgentStep | AgentRun, tuple[str, ...] | None]] = []

    def _lost(self) -> LeaseLost:
        return LeaseLost(f"run {self.run.pk} is no longer held by {self.holder}")

    def _written(self, fenced: Fenced) -> None:
        if not fenced.written:
            raise self._lost()
        if fenced.cancel_requested:
            self.cancelled.set()

    def _write(self, *writes: tuple[AgentStep | AgentRun, tuple[str, ...] | None]) -> None:
        """What is staged, then `writes` (a step to insert, with None, or to save those fields of), in one
        fenced statement; then each of them is announced, in order, once it commits."""
        writes, self._staged = (*self._staged, *writes), []
        self._written(write_fenced(
            inserts=[written for written, names in writes if names is None],
            updates=[(written, names) for written, names in writes if names is not None],
            run_id=self.run.pk, holder=self.holder,
        ))
        for written, _ in writes:
            if isinstance(written, AgentStep):  # not the run's own row (routing changes it, see `route`)
                step_announce(self.run, written)

    def flush(self) -> None:
        """Write what is staged, now."""
        if self._staged:
            self._write()

    def _end(self, *, status: str, reply: str = "", stop_reason: str = "", error: str = "",
             reply_message: AgentMessage | None = None, answered_by: int | None = None) -> AgentRun:
        """Close the run (`run_finish`), with the steps staged for insertion and the reply's message in the
        statement that closes it (which announces the steps); staged outcomes (updates) go first, on their own."""
        if any(fields is not None for _, fields in self._staged):
            self.flush()
        staged, self._staged = [step for step, _ in self._staged], []
        return run_finish(run=self.run, status=status, reply=reply, stop_reason=stop_reason, error=error,
                          steps=self.steps, holder=self.holder, answered_by=answered_by,
                          with_rows=[*staged, *([reply_message] if reply_message is not None else [])])

    @contextlib.contextmanager
    def _ending(self) -> Iterator[None]:
        """The transaction that ends the run, with what is staged. Should the end be refused because the person
        stopped the run first (`CancelledBeforeEnd`: all of it rolled back), what was staged is staged again,
        for the end that follows to write."""
        staged = list(self._staged)
        try:
            with transaction.atomic():
                yield
        except CancelledBeforeEnd:
            for step, fields in staged:
                if fields is None:
                    step.pk, step._state.adding = None, True
            self._staged = staged
            raise

    # --- steps -------------------------------------------------------------------------------

    def add(self, *, stage: bool = False, **fields: Any) -> AgentStep:
        """A new step after the last one (`stage`: written with the next write; see the class)."""
        seq = (self.steps[-1].seq + 1) if self.steps else 1
        step = AgentStep(run=self.run, seq=seq, **fields)
        _make_storable(step)
        if stage:
            self._staged.append((step, None))
            self.steps.append(step)
            return step
        self._write((step, None))
        self.steps.append(step)
        if self.plan is not None and self._follows_plan(step) and step_started(self.plan.steps, step) is not None:
            self._save_plan()
        return step

    def save(self, step: AgentStep, *fields: str, stage: bool = False) -> None:
        _make_storable(step, tuple(name for name in fields if name in (*_JSON_FIELDS, *_TEXT_FIELDS, *_NAME_FIELDS)))
        if stage:
            self._staged.append((step, fields))
        else:
            self._write((step, fields))

    def notice(self, text: str) -> AgentStep:
        return self.add(kind=Kind.NOTICE, reason=text, took_effect=False)

    def route(self, spec: str, config: dict[str, Any], *, reason: str) -> AgentStep:
        """The run becomes the run of the member `spec` with these settings and model (routing, see
        `lifecycle.run_routed_config`), and a notice says why. Staged: both are written in the statement of the
        next write (at the latest before its first model call); a worker that dies before then leaves the run as
        it was, to be routed again."""
        self.run.spec, self.run.config, self.run.model = spec, config, str(config["model"])
        self._staged.append((self.run, ("spec", "config", "model")))
        return self.add(kind=Kind.NOTICE, reason=reason, took_effect=False, stage=True)

    def finish_step(self, step: AgentStep, outcome: dict[str, Any], duration_ms: int | None = None, *,
                    stage: bool = False) -> None:
        """Record a tool step's outcome (what the executor answered, or why nothing ran). `stage`: written with
        the next write (not while the run follows a plan, whose record follows each outcome at once)."""
        step_outcome_set(step, outcome, duration_ms)
        if self.plan is not None and self._follows_plan(step) and not any(
                step.pk in planned["step_ids"] for planned in self.plan.steps):
            # Its start reached the record but not the plan (a worker died between the two writes): the plan hears
            # of it now, so the plan step it carried out ends as it did rather than as never started.
            step_started(self.plan.steps, step)
        followed = step_finished(self.plan.steps, step) if self.plan is not None and self._follows_plan(step) else None
        if followed and followed["status"] == AgentPlan.Status.FAILED:
            # Said to the model with the outcome, as data: the plan is to be revised, not ploughed on with.
            step.result = {**outcome, "plan": {"step": followed["n"], "status": "failed", "next": REVISE}}
        self.save(step, "state", "result", "took_effect", "reason", "card", "duration_ms",
                  stage=stage and self.plan is None)
        if followed:
            self._save_plan()

    # --- plan --------------------------------------------------------------------------------

    def _follows_plan(self, step: AgentStep) -> bool:
        return self.plan is not None and step.kind == Kind.TOOL_CALL and step.tool_name != PLAN_TOOL

    def write_plan(self, plan: AgentPlan) -> AgentPlan:
        """A new revision of the run's plan, which the run follows from now on."""
        self.flush()
        self._written(insert_fenced(plan, run_id=self.run.pk, holder=self.holder))
        self.plan = plan
        publish_to_user(self.run.owner_id, plan_event(self.run, plan))
        return plan

    def close_plan(self, *, why: str) -> None:
        """Nothing more of the plan is done (the person declined it, or asked for changes): every step still
        to do is skipped, saying why."""
        if self.plan is not None and steps_dropped(self.plan.steps, why=why):
            self._save_plan()

    def _save_plan(self) -> None:
        assert self.plan is not None
        self.flush()
        self.plan.updated_at = timezone.now()
        self._written(update_fenced(self.plan, ("steps", "updated_at"), run_id=self.run.pk, holder=self.holder))
        publish_to_user(self.run.owner_id, plan_event(self.run, self.plan))

    # --- pause, reply, end -------------------------------------------------------------------

    def pause(self, tool: Tool | PlanTool, step: AgentStep | None, *, summary: str = "",
              containment: dict[str, Any] | None = None, **fields: Any) -> AgentStep:
        """Ask the person about this tool call (a new step made of `fields`, or `step` if it exists) and
        release the run: a paused run holds no worker. `summary` (what the call will do, in words) and
        `containment` (why it asks, when the run read someone else's text) are written with the step that
        waits, in the same fenced write."""
        with transaction.atomic():
            if step is None:
                step = self.add(state=State.AWAITING_CONFIRMATION, reason=QUESTION, summary=summary,
                                containment=containment, **fields)
            elif (summary and not step.summary) or (containment and not step.containment):
                step.summary = step.summary or summary
                step.containment = step.containment or containment
                self.save(step, "summary", "containment")
            else:
                self.flush()
            if not run_await_person(self.run, holder=self.holder, step=step, tool=tool):
                raise self._lost()
        return step

    def label(self, others_text: list[dict[str, Any]]) -> None:
        """Keep on the run's row the text by others it has read (see assistant/tools/provenance.py)."""
        self.flush()
        if not AgentRun.objects.filter(pk=self.run.pk, lease_owner=self.holder).update(others_text=others_text):
            raise self._lost()
        self.run.others_text = others_text

    def await_members(self) -> bool:
        """Pause the run while any member it asked is still at work, releasing it: a waiting run holds no
        worker, and the end of its last working member puts it back on the queue. Returns False, changing
        nothing, when none is at work any more, or when the person stopped the run (`cancelled` is then
        set); raises LeaseLost when this worker no longer holds it."""
        self.flush()
        if run_await_members(self.run, holder=self.holder):
            return True
        cancel = AgentRun.objects.filter(pk=self.run.pk, lease_owner=self.holder).values_list(
            "cancel_requested", flat=True).first()
        if cancel is None:
            raise self._lost()
        if cancel:
            self.cancelled.set()
        return False

    def succeed(self, user: Any, reply: str, handed: HandedOver | None = None, *,
                question: AgentMessage | None = None) -> tuple[AgentRun, AgentMessage]:
        """End the run with its reply, one message in the chat, which becomes the chat's newest activity;
        `handed`: the reply is a member's answer (a handoff), and the message names the member. `question`: the
        person's message it answers, which the reply follows in the chat's thread (assistant/live/threads.py)."""
        reply = clean_text(reply)
        links = openable_links(user, reply)  # read as the person, before the run's rows are taken
        with self._ending():
            # The chat's row before the run's, in the order a send or a delete takes them (a worker holding
            # the run while it waits for the chat would close a circle with a send holding the chat), and in
            # the reply's transaction: a list of chats asked for on the event has the chat in its place.
            at = timezone.now()
            leaf = chat_activity_record(chat_id=self.run.chat_id, at=at)
            # The run's end, its last step (the model's answer) and the reply's message: one fenced statement.
            # A member that wrote it is named on it: one handed over to, or the one this run was routed to.
            routed = bool(self.run.routed_from)
            message = AgentMessage(chat_id=self.run.chat_id, owner=user, role=AgentMessage.Role.ASSISTANT,
                                   content=reply, run=self.run, created_at=at, links=links,
                                   parent_id=question.pk if question is not None else None,
                                   member=handed.member if handed is not None else self.run.spec if routed else "")
            run = self._end(status=Status.SUCCEEDED, reply=reply, reply_message=message,
                            answered_by=handed.written_by if handed is not None else None)
            if question is not None and leaf == question.pk:
                # The person reads a branch that ends with this question (one they edited or asked again): it
                # now ends with its answer. A chat never branched has no leaf, and nothing to write here.
                AgentChat.objects.filter(pk=self.run.chat_id, leaf_id=question.pk).update(leaf_id=message.pk)
            # An answer given again is a branch beside the earlier answers: it says which of them it is.
            branch = branch_payloads([message]).get(message.pk) if self.run.answers_again_id is not None else None
            # Little left of the person's allowance: the reply says how much, before a send is refused for it.
            low = allowance_note(run)
            publish_to_user(run.owner_id, run_event(
                event_names.REPLIED, run, message=message_payload(message, branch), run=run_payload(run),
                **({"allowance": low} if low else {}),
            ))
        return run, message

    def answer(self, reply: str, handed: HandedOver | None = None) -> AgentRun:
        """End a member's run with its reply on its own row: it answers the run that asked it, not the chat;
        `handed`: the reply is the answer of a member it handed over to."""
        with self._ending():
            return self._end(status=Status.SUCCEEDED, reply=clean_text(reply),
                             answered_by=handed.written_by if handed is not None else None)

    def stop(self, status: str, stop_reason: str, message: str) -> AgentRun:
        """End the run without a reply (a limit, a cancel, a model error, a crash)."""
        with transaction.atomic():
            return self._end(status=status, stop_reason=stop_reason, error=clean_text(message))

    def store_summary(self, summary: AgentMessage) -> None:
        """Keep a summary of older messages made during this turn (see `conversation_window`)."""
        summary.content = clean_text(summary.content)
        self.flush()
        self._written(insert_fenced(summary, run_id=self.run.pk, holder=self.holder))
