"""The panel's record of a run, as AG-UI events (docs/ag-ui.md, "Events").

A `Translator` follows one top run and the members it asks, for one AG-UI run of the client. It is fed two
things: the text the models stream (the panel's `assistant.token` deltas, `token`), and the rows (`state`,
the tree's runs and steps as `assistant.agui.runs.tree_state` reads them, each a step as the panel's
`assistant.step` event carries it). Everything but the streamed text comes from the rows: a lost event
changes nothing, and a stream that re-attaches, or reads again after a gap, catches up by comparing the rows
with what it has said. Each step, tool call and result is said once; a message is never said twice.

Ids on the wire are made from the rows, so that a later stream, and a messages snapshot, name the same things
the same way: a model call's text is `msg-<run>-<seq>`, a tool step's call `call-<run>-<seq>` and its result
`result-<run>-<seq>`, a member's run `run-<run>` (its `subagentRunId`), an approval's interrupt
`approval-<step id>`.

Nothing here touches the database, the channel layer or the clock: it is the pure part, tested alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from assistant.infra import event_names
from assistant.live.events import bounded
from assistant.plans.offer import PLAN_TOOL

#: The runs of a tree that still work (a worker has them, or will): the tree is not paused while one does.
WORKING = ("queued", "running")
#: A run that waits, holding no worker.
WAITING = ("awaiting_confirmation", "awaiting_members")
#: What an approval's interrupt expects back (`resume[].payload`), as JSON Schema.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "Do this as you, now."}},
    "required": ["approve"],
}
#: A plan's approval also takes the person's words instead of a yes (`approve: false` with a `comment`).
PLAN_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {**APPROVAL_SCHEMA["properties"],
                   "comment": {"type": "string", "title": "What to change",
                               "description": "Instead of approving: what the plan should do differently."}},
    "required": ["approve"],
}
TOOL_APPROVAL = "tool_approval"
PLAN_APPROVAL = "plan_approval"


class SnapshotHere:
    """A placeholder the stream replaces with a MESSAGES_SNAPSHOT read from the rows: what the client was told
    of a text differs from what was recorded (a delta lost, or a stream attached mid-message)."""


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


def as_json(value: Any) -> str:
    """A row's JSON as the wire carries it: within the panel's bounds (big integers as strings of digits)."""
    return json.dumps(bounded(value), ensure_ascii=False)


def waiting_steps(runs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (run, step) pairs of the tree that wait for the person's answer, oldest first."""
    found = [(run, step) for run in runs if run["status"] == "awaiting_confirmation"
             for step in run["steps"] if step["state"] == "awaiting_confirmation" and not step["confirmation"]]
    return sorted(found, key=lambda pair: (pair[1]["created_at"] or "", pair[1]["id"]))


def paused(runs: list[dict[str, Any]]) -> bool:
    """The tree waits for the person and nothing of it works meanwhile: the AG-UI run can end interrupted."""
    return bool(runs) and not any(run["status"] in WORKING for run in runs) and bool(waiting_steps(runs))


@dataclass
class _Text:
    message_id: str
    said: str = ""


@dataclass
class Translator:
    """One AG-UI run's view of one top run (`top`) and its members; see the module docstring."""

    thread_id: str
    run_id: str
    top: int
    finished: bool = False
    #: Set when what the client holds differs from the record: a snapshot is sent before the run ends.
    owe_snapshot: bool = False
    _texts: dict[int, _Text] = field(default_factory=dict)
    #: Per run, recorded text said from the rows before its deltas arrived: those deltas, when they come, are
    #: not said again.
    _unstreamed: dict[int, str] = field(default_factory=dict)
    _last_seq: dict[int, int] = field(default_factory=dict)
    _last_model: dict[int, int] = field(default_factory=dict)
    _last_model_text: dict[int, str] = field(default_factory=dict)
    _called: set[tuple[int, int]] = field(default_factory=set)
    _resulted: set[tuple[int, int]] = field(default_factory=set)
    _modelled: set[tuple[int, int]] = field(default_factory=set)
    _noticed: set[tuple[int, int]] = field(default_factory=set)
    _open_steps: dict[tuple[int, int], str] = field(default_factory=dict)
    _step_keys: dict[int, tuple[int, int]] = field(default_factory=dict)
    _members: dict[int, dict[str, Any]] = field(default_factory=dict)
    _active: dict[int, None] = field(default_factory=dict)  # active subagents, in the order they started
    _ended: set[int] = field(default_factory=set)
    _rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    _walked: set[int] = field(default_factory=set)

    # --- what the client already holds ---------------------------------------------------------

    def prime(self, state: dict[str, Any], *, answered: frozenset[int] = frozenset()) -> list[Any]:
        """Take what `state` records as already said (the client holds it: a messages snapshot of it was just
        sent, or it is what the interrupted run said before the client resumed it). The steps in `answered`
        (the approvals a resume answers) are said to have been called but not finished. Returns the
        SUBAGENT_STARTED of every member still at work, so that this run can tell how each ends."""
        for run in state["runs"]:
            self._remember_run(run)
            for step in run["steps"]:
                key = (run["id"], step["seq"])
                self._step_keys[step["id"]] = key
                self._last_seq[run["id"]] = max(self._last_seq.get(run["id"], 0), step["seq"])
                if step["kind"] == "model_call":
                    self._modelled.add(key)
                    self._last_model[run["id"]] = step["seq"]
                    self._last_model_text[run["id"]] = (step["result"] or {}).get("text") or ""
                elif step["kind"] == "tool_call":
                    self._called.add(key)
                    if step["state"] == "finished" and step["id"] not in answered:
                        self._resulted.add(key)
                else:
                    self._noticed.add(key)
        events: list[Any] = []
        for run in state["runs"][1:]:
            if run["status"] in (*WORKING, *WAITING):
                events += self._subagent_start(run["id"])
        return events

    # --- the streamed text ---------------------------------------------------------------------

    def token(self, run: int, delta: str, route: dict[str, Any]) -> list[Any]:
        """A delta of the text a model of the tree streams (`route`: the event's member keys, for a member)."""
        if self.finished or not isinstance(delta, str):
            return []
        if run != self.top:
            self._remember_run({"id": run, "member": route.get("member"), "parent_run_id": route.get("parent_run_id"),
                                "asked_in": route.get("asked_in"), "task": None})
        owed = self._unstreamed.get(run)
        if owed is not None:
            if owed.startswith(delta):
                # A delta of text the rows said already (they were read before this delta arrived).
                if owed[len(delta):]:
                    self._unstreamed[run] = owed[len(delta):]
                else:
                    del self._unstreamed[run]
                return []
            del self._unstreamed[run]
        text = self._texts.get(run)
        if text is None:
            last = self._last_seq.get(run, 0)
            if last and self._last_model.get(run) == last:
                # The run's newest step is a model call already said: this delta is of that call, and came
                # after the rows that recorded it (a run's next model call starts only after a tool step).
                return []
            events: list[Any] = []
            if run != self.top:
                events += self._subagent_start(run)
            text = self._texts[run] = _Text(msg_id(run, last + 1))
            events.append(TextMessageStartEvent(message_id=text.message_id, role="assistant", **self._by(run)))
        else:
            events = []
        text.said += delta
        events.append(TextMessageContentEvent(message_id=text.message_id, delta=delta, **self._by(run)))
        return events

    def plan(self, run: int, plan: Any) -> list[Any]:
        """A revision of a run's plan, or a change to it, as the panel's `assistant.plan` carries it."""
        if self.finished:
            return []
        return [CustomEvent(name=event_names.PLAN, value=bounded(plan), **self._by(run))]

    # --- the rows ------------------------------------------------------------------------------

    def rows(self, state: dict[str, Any]) -> list[Any]:
        """Everything the rows record that has not been said, then the run's end if it has ended (or the
        interrupt, if the tree now waits for the person with nothing of it at work)."""
        if self.finished:
            return []
        if state.get("gone"):
            return self._end([RunErrorEvent(message="This conversation was deleted.", code="not_found")])
        runs = state["runs"]
        for run in runs:
            self._remember_run(run)
        self._rows = {run["id"]: run for run in runs}
        self._walked = set()
        events = self._walk(self.top)
        for run in runs[1:]:  # a member no step of the tree names (not expected): said after the rest
            events += self._walk(run["id"])
        top = runs[0]
        status = top["status"]
        if status == "succeeded":
            events += self._answered(state.get("reply"))
        elif status in ("failed", "timed_out"):
            events += self._end([RunErrorEvent(message=top["error"] or "The run failed.",
                                               code=top["stop_reason"] or status,
                                               metadata={"assistantRunId": top["id"], "status": status})],
                                failed=True)
        elif status == "cancelled":
            events += self._end([RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, outcome=RunFinishedCancelledOutcome(),
                metadata={"assistantRunId": top["id"], "stopReason": top["stop_reason"], "message": top["error"]})],
                failed=True)
        elif paused(runs):
            events += self._interrupt(runs, state.get("tools") or {})
        return events

    def _walk(self, run_id: int) -> list[Any]:
        """A run's steps in order, each member it asked walked where its asking step is (after the call, before
        its result), then the member's end if it ended."""
        run = self._rows.get(run_id)
        if run is None or run_id in self._walked:
            return []
        self._walked.add(run_id)
        events: list[Any] = []
        if run_id != self.top and run["steps"]:
            events += self._subagent_start(run_id)
        for step in run["steps"]:
            events += self._step(run_id, step)
        if run_id != self.top and run["status"] not in (*WORKING, *WAITING):
            events += self._member_ended(run)
        return events

    def _step(self, run: int, step: dict[str, Any]) -> list[Any]:
        key = (run, step["seq"])
        self._step_keys[step["id"]] = key
        self._last_seq[run] = max(self._last_seq.get(run, 0), step["seq"])
        if step["kind"] == "model_call":
            return self._model_step(run, step, key)
        if step["kind"] == "tool_call":
            return self._tool_step(run, step, key)
        if key in self._noticed:
            return []
        self._noticed.add(key)
        return [CustomEvent(name=event_names.NOTICE, value={"text": step["reason"], "seq": step["seq"],
                                                            "assistantRunId": run}, **self._by(run))]

    def _model_step(self, run: int, step: dict[str, Any], key: tuple[int, int]) -> list[Any]:
        text = (step["result"] or {}).get("text") or ""
        events: list[Any] = []
        if key not in self._modelled:
            self._modelled.add(key)
            self._unstreamed.pop(run, None)  # an earlier call's deltas that never came: not this call's
            events += self._close_text(run, final=(msg_id(*key), text))
            if not events and text:
                wire = msg_id(*key)
                events += [TextMessageStartEvent(message_id=wire, role="assistant", **self._by(run)),
                           TextMessageContentEvent(message_id=wire, delta=text, **self._by(run)),
                           TextMessageEndEvent(message_id=wire, **self._by(run))]
                self._unstreamed[run] = text
        if self._last_model.get(run, 0) <= step["seq"]:
            self._last_model[run] = step["seq"]
            self._last_model_text[run] = text
        return events

    def _tool_step(self, run: int, step: dict[str, Any], key: tuple[int, int]) -> list[Any]:
        events: list[Any] = []
        by = self._by(run)
        wire = call_id(*key)
        if key not in self._called:
            self._called.add(key)
            events += self._close_text(run)
            parent = self._last_model.get(run)
            events += [ToolCallStartEvent(tool_call_id=wire, tool_call_name=step["tool_name"],
                                          parent_message_id=msg_id(run, parent) if parent else None,
                                          metadata=self._step_metadata(run, step), **by),
                       ToolCallArgsEvent(tool_call_id=wire, delta=as_json(step["arguments"]), **by),
                       ToolCallEndEvent(tool_call_id=wire, **by)]
        result = step["result"] if isinstance(step["result"], dict) else {}
        child = result.get("child_run_id")
        if isinstance(child, int) and not isinstance(child, bool):
            known = {"member": result.get("member"), "parent": run, "asked_in_key": key,
                     "task": (step["arguments"] or {}).get("task")}
            self._members.setdefault(child, {}).update({name: value for name, value in known.items()
                                                        if value is not None})
            if step["state"] != "finished":
                events += self._subagent_start(child)
        if key in self._resulted:
            return events
        if isinstance(child, int) and not isinstance(child, bool):
            events += self._walk(child)
        if step["state"] == "finished":
            if isinstance(child, int) and not isinstance(child, bool):
                events += self._subagent_end(child, result)
            if key not in self._open_steps:
                events.append(StepStartedEvent(step_name=step_name(step), **by))
            self._open_steps.pop(key, None)
            self._resulted.add(key)
            events += [ToolCallResultEvent(message_id=result_id(*key), tool_call_id=wire, role="tool",
                                           content=as_json(step["result"]),
                                           metadata=self._step_metadata(run, step), **by),
                       StepFinishedEvent(step_name=step_name(step), **by)]
        elif key not in self._open_steps and not (step["state"] == "awaiting_confirmation"
                                                  and step["confirmation"] == "denied"):
            self._open_steps[key] = step_name(step)
            events.append(StepStartedEvent(step_name=step_name(step), **by))
        return events

    # --- texts, members and endings ------------------------------------------------------------

    def _close_text(self, run: int, final: tuple[str, str] | None = None) -> list[Any]:
        """End the run's open text, if one is open. With `final` (the model call's wire id and recorded text):
        the rest of the recorded text is said first when what was streamed is its beginning; otherwise what
        the client holds differs from the record, and a snapshot is owed."""
        text = self._texts.pop(run, None)
        if text is None:
            return []
        events: list[Any] = []
        if final is not None:
            wire, recorded = final
            if wire == text.message_id and recorded.startswith(text.said):
                rest = recorded[len(text.said):]
                if rest:
                    events.append(TextMessageContentEvent(message_id=wire, delta=rest, **self._by(run)))
                    self._unstreamed[run] = rest
            else:
                self.owe_snapshot = True
        events.append(TextMessageEndEvent(message_id=text.message_id, **self._by(run)))
        return events

    def _remember_run(self, run: dict[str, Any]) -> None:
        if run["id"] == self.top:
            return
        known = self._members.setdefault(run["id"], {})
        for key, source in (("member", "member"), ("parent", "parent_run_id"), ("asked_in", "asked_in"),
                            ("task", "task")):
            if run.get(source) is not None:
                known[key] = run[source]

    def _subagent_start(self, run: int) -> list[Any]:
        if run == self.top or run in self._active or run in self._ended:
            return []
        known = self._members.get(run, {})
        parent = known.get("parent")
        events: list[Any] = []
        if isinstance(parent, int) and parent != self.top:
            events += self._subagent_start(parent)
        asked_key = known.get("asked_in_key") or self._step_keys.get(known.get("asked_in") or -1)
        self._active[run] = None
        events.append(SubagentStartedEvent(
            subagent_run_id=subagent_id(run), name=str(known.get("member") or "member"),
            description=str(known["task"])[:2000] if known.get("task") else None,
            parent_subagent_run_id=subagent_id(parent) if isinstance(parent, int) and parent != self.top else None,
            parent_tool_call_id=call_id(*asked_key) if asked_key else None,
            metadata={"assistantRunId": run}))
        return events

    def _close_member(self, run: int) -> list[Any]:
        """A member's open text and steps, and the members it asked, ended before the member itself."""
        events: list[Any] = []
        for child, known in list(self._members.items()):
            if known.get("parent") == run and child in self._active:
                events += self._subagent_end(child, {"status": "member_stopped"})
        events += self._close_text(run)
        for key, name in list(self._open_steps.items()):
            if key[0] == run:
                del self._open_steps[key]
                events.append(StepFinishedEvent(step_name=name, **self._by(run)))
        return events

    def _subagent_end(self, run: int, outcome: dict[str, Any]) -> list[Any]:
        if run not in self._active:
            return []
        events = self._close_member(run)
        del self._active[run]
        self._ended.add(run)
        status = outcome.get("status")
        if status == "answered":
            events.append(SubagentFinishedEvent(subagent_run_id=subagent_id(run),
                                                outcome=SubagentFinishedSuccessOutcome(),
                                                result=bounded(outcome.get("answer"))))
        else:
            events.append(SubagentErrorEvent(subagent_run_id=subagent_id(run), code=str(status or "failed"),
                                             message=str(outcome.get("reason") or outcome.get("answer")
                                                         or "The member could not finish.")[:2000]))
        return events

    def _member_ended(self, run: dict[str, Any]) -> list[Any]:
        """A member's run ended: its end, as its own run says it (the asking step, when it finishes, says no more)."""
        if run["status"] == "succeeded":
            return self._subagent_end(run["id"], {"status": "answered", "answer": run["reply"]})
        return self._subagent_end(run["id"], {"status": run["stop_reason"] or run["status"], "reason": run["error"]})

    def _close_all(self, *, suspended: list[str] | None = None, failed: bool = False) -> list[Any]:
        """Everything still open ended, as the verifier of the reference client requires before a run ends:
        texts, steps, then the members, the deepest first (suspended, with the interrupts they wait on; or
        ended as the run ended)."""
        events: list[Any] = []
        for run in list(self._texts):
            events += self._close_text(run)
        for key, name in list(self._open_steps.items()):
            del self._open_steps[key]
            events.append(StepFinishedEvent(step_name=name, **self._by(key[0])))
        for run in reversed(list(self._active)):
            del self._active[run]
            self._ended.add(run)
            if suspended is not None:
                events.append(SubagentFinishedEvent(subagent_run_id=subagent_id(run),
                                                    outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=suspended)))
            elif failed:
                events.append(SubagentErrorEvent(subagent_run_id=subagent_id(run), code="stopped",
                                                 message="The request ended before this member answered."))
            else:
                events.append(SubagentFinishedEvent(subagent_run_id=subagent_id(run),
                                                    outcome=SubagentFinishedSuccessOutcome()))
        return events

    def _end(self, terminal: list[Any], *, suspended: list[str] | None = None,
             failed: bool = False) -> list[Any]:
        events = self._close_all(suspended=suspended, failed=failed)
        if self.owe_snapshot:
            events.append(SnapshotHere())
        self.finished = True
        return events + terminal

    def _answered(self, reply: dict[str, Any] | None) -> list[Any]:
        events: list[Any] = []
        text = reply["content"] if reply else ""
        if text and text != self._last_model_text.get(self.top, ""):
            # The reply is not the last model call's text (a limit's or a fallback's words): said as its own message.
            wire = f"reply-{reply['id']}" if reply else "reply"
            events += [TextMessageStartEvent(message_id=wire, role="assistant"),
                       TextMessageContentEvent(message_id=wire, delta=text), TextMessageEndEvent(message_id=wire)]
        return self._end([*events, RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=RunFinishedSuccessOutcome(),
            result={"reply": text}, metadata={"assistantRunId": self.top})])

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

    # --- attribution ---------------------------------------------------------------------------

    def _by(self, run: int) -> dict[str, Any]:
        return {} if run == self.top else {"subagent_run_id": subagent_id(run)}

    def _step_metadata(self, run: int, step: dict[str, Any]) -> dict[str, Any]:
        return {"assistantRunId": run, "stepId": step["id"], "seq": step["seq"], "state": step["state"],
                "confirmation": step["confirmation"], "tookEffect": step["took_effect"]}
