"""A run's steps, walked in order from the rows, each said once: a model call's text (text.py); a tool call as
TOOL_CALL_START, _ARGS and _END inside its STEP_STARTED, then its TOOL_CALL_RESULT and STEP_FINISHED once it has
finished (with a custom event carrying its card between them, if its tool drew one); a notice as a custom event.
A member is walked where the step that asked it is."""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    CustomEvent,
    StepFinishedEvent,
    StepStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from assistant.agui.translate.state import WAITING, WORKING
from assistant.agui.translate.text import TextMessages
from assistant.agui.translate.wire import as_json, call_id, msg_id, result_id, step_name
from assistant.infra import event_names


class Steps(TextMessages):
    """The step, tool call and notice events of a `Translator`."""

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
                                           metadata=self._step_metadata(run, step), **by)]
            if isinstance(step.get("card"), str) and step["card"]:
                # The tool's card of what it did: HTML the server drew with the app's template and sanitised.
                events.append(CustomEvent(name=event_names.CARD, value={
                    "toolCallId": wire, "html": step["card"], "assistantRunId": run, "stepId": step["id"]}, **by))
            events.append(StepFinishedEvent(step_name=step_name(step), **by))
        elif key not in self._open_steps and not (step["state"] == "awaiting_confirmation"
                                                  and step["confirmation"] == "denied"):
            self._open_steps[key] = step_name(step)
            events.append(StepStartedEvent(step_name=step_name(step), **by))
        return events

    def _step_metadata(self, run: int, step: dict[str, Any]) -> dict[str, Any]:
        return {"assistantRunId": run, "stepId": step["id"], "seq": step["seq"], "state": step["state"],
                "confirmation": step["confirmation"], "tookEffect": step["took_effect"]}
