"""The models' text as AG-UI text messages: the streamed deltas as they come, and each model call's recorded
text, said only where the stream did not say it (the rest of a text, or a text whose deltas never came); a
text the client holds that differs from the record owes a messages snapshot."""

from __future__ import annotations

from typing import Any

from ag_ui.core import TextMessageContentEvent, TextMessageEndEvent, TextMessageStartEvent

from assistant.agui.translate.members import Members
from assistant.agui.translate.state import OpenText
from assistant.agui.translate.wire import msg_id


class TextMessages(Members):
    """The text message events of a `Translator` (a member's text starts that member first)."""

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
            text = self._texts[run] = OpenText(msg_id(run, last + 1))
            events.append(TextMessageStartEvent(message_id=text.message_id, role="assistant", **self._by(run)))
        else:
            events = []
        text.said += delta
        events.append(TextMessageContentEvent(message_id=text.message_id, delta=delta, **self._by(run)))
        return events

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
