"""The `Translator`: one AG-UI run's view of one top run and its members, fed what the client already holds,
the streamed text and plans, and the rows; each family of events is a part of it (see the package docstring)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import CustomEvent, RunErrorEvent, RunFinishedCancelledOutcome, RunFinishedEvent

from assistant.agui.translate.interrupts import Interrupts, paused
from assistant.agui.translate.state import WAITING, WORKING
from assistant.agui.translate.steps import Steps
from assistant.infra import event_names
from assistant.live.events import bounded


class Translator(Steps, Interrupts):
    """One AG-UI run's view of one top run (`top`) and its members; see the package docstring. The streamed
    text comes in through `token` (text.py)."""

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

    # --- what is relayed as it comes -----------------------------------------------------------

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
            events += self._answered(state.get("reply"), top.get("answered_by"), allowance=state.get("allowance"))
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
