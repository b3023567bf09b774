"""How an AG-UI run ends: everything still open closed first (texts, steps, members), a messages snapshot where
one is owed, then the terminal event — RUN_FINISHED with the reply, or the run's error."""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from assistant.agui.translate.text import TextMessages
from assistant.agui.translate.wire import is_said_by, subagent_id


class SnapshotHere:
    """A placeholder the stream replaces with a MESSAGES_SNAPSHOT read from the rows: what the client was told
    of a text differs from what was recorded (a delta lost, or a stream attached mid-message)."""


class Endings(TextMessages):
    """The run's end in a `Translator`."""

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

    def _answered(self, reply: dict[str, Any] | None, answered_by: int | None = None, *,
                  allowance: str | None = None) -> list[Any]:
        """The run's reply, then its end. The reply is said as a message of its own only when the client does
        not hold it already as the text of the model call that wrote it: the top run's last, or, when a member
        answered for it (a handoff; `answered_by`, the member's run that wrote the answer), that member's last,
        said as the member's text and attributed to it. Either way the person reads it once."""
        events: list[Any] = []
        text = reply["content"] if reply else ""
        writer = answered_by or self.top
        if text and not is_said_by(text, self._last_model_text.get(writer, "")):
            # The reply is not the last model call's text (a limit's or a fallback's words): said as its own message.
            wire = f"reply-{reply['id']}" if reply else "reply"
            events += [TextMessageStartEvent(message_id=wire, role="assistant"),
                       TextMessageContentEvent(message_id=wire, delta=text), TextMessageEndEvent(message_id=wire)]
        metadata: dict[str, Any] = {"assistantRunId": self.top}
        if answered_by is not None:
            # Who wrote the reply, for a client that folds its members' work away: the answer is that subagent's.
            metadata.update(answeredBy=subagent_id(answered_by), member=(reply or {}).get("member"))
        elif reply and reply.get("member"):
            metadata["member"] = reply["member"]  # the run itself was the member's: a plain request routed to it
        if allowance:
            metadata["allowance"] = allowance  # little is left of the person's allowance: how much, in words
        return self._end([*events, RunFinishedEvent(
            thread_id=self.thread_id, run_id=self.run_id, outcome=RunFinishedSuccessOutcome(),
            result={"reply": text}, metadata=metadata)])
