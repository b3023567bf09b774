"""The members a run asks, as AG-UI subagents: SUBAGENT_STARTED when one is first seen at work (its parent
first), and SUBAGENT_FINISHED or SUBAGENT_ERROR when it ends, after its own open text and steps and the
members it asked."""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    StepFinishedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
)

from assistant.agui.translate.state import TranslatorState
from assistant.agui.translate.wire import call_id, subagent_id
from assistant.live.events import bounded


class Members(TranslatorState):
    """The subagent events of a `Translator`."""

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
