"""Replaying a recorded run: the model is called for real, and every tool call is answered from the recording —
never by running a view — so a replay cannot change the site's data.

A replay is a run of channel `eval` whose settings carry `replay`: `{"recordings": [...]}`, the recordings its
tool calls are answered from (replays.py makes them from a case). The core's turn asks the channel's policy
(channel.py) what answers them, and gets `RecordedTools`; it imports nothing of this app. The matching rule:

- a call is answered by a recorded call of the same tool whose arguments are equal (as JSON: the order of an
  object's keys does not matter, everything else does: `1` is not `"1"`), the earliest not yet used;
- each recorded call answers once: a call repeated more often than the recording made it, or one the
  recording never made, gets the outcome `no_recorded_answer` (nothing was run), which a grade counts as a
  deviation;
- a call the recording's person was asked about answers as they answered (approved: its recorded outcome;
  declined: declined): a replay never waits for anyone;
- a call the recording's person approved with changes is matched by what the model asked for too: it is answered
  as it ran, the replay's step holds what they approved, and the model is told what they changed;
- a member asked in a replay replays too, from the recordings of that member's runs in the recording.

The answers already given survive a worker's death: they are read back from the replay's own steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from assistant.tools.validation import changed_values

NO_RECORDED_ANSWER = "no_recorded_answer"
NO_RECORDED_ANSWER_REASON = ("This replay has no recorded answer for this call: the recording made no call of this "
                             "tool with these arguments (or made it fewer times); nothing was run.")


def canonical_arguments(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class _Recorded:
    """One recorded call: its tool, its arguments as run (canonical), its outcome; and, when the person approved
    it with changes, what the model had asked for (canonical) and what was changed."""

    tool: str
    arguments: str
    result: dict[str, Any]
    asked: str | None = None
    changed: dict[str, Any] | None = None


def _recorded_calls(recordings: Iterable[dict[str, Any]]) -> list[_Recorded]:
    calls = []
    for recording in recordings:
        for step in recording.get("steps") or []:
            if isinstance(step, dict) and step.get("kind") == "tool_call" and isinstance(step.get("result"), dict):
                arguments, asked = step.get("arguments") or {}, step.get("asked_arguments")
                if isinstance(asked, dict) and isinstance(arguments, dict):
                    edited: tuple[str | None, dict[str, Any] | None] = (
                        canonical_arguments(asked), changed_values(asked, arguments))
                else:
                    edited = (None, None)
                calls.append(_Recorded(str(step.get("tool", "")), canonical_arguments(arguments), step["result"],
                                       *edited))
    return calls


class RecordedTools:
    """The answers of one replaying run, in the matching rule's order."""

    def __init__(self, recordings: list[dict[str, Any]], answered: Iterable[tuple[str, Any]] = ()) -> None:
        self._calls = _recorded_calls(recordings)
        self._used: set[int] = set()
        for name, arguments in answered:  # what this run was answered before a worker took it up again
            self._take(name, arguments)

    def _take(self, name: str, arguments: Any) -> dict[str, Any] | None:
        wanted = canonical_arguments(arguments)
        for index, recorded in enumerate(self._calls):
            if index in self._used or recorded.tool != name:
                continue
            if recorded.arguments == wanted:
                self._used.add(index)
                return recorded.result
            if recorded.asked == wanted:
                # What the model asked for, which the recording's person approved with changes: what ran was theirs.
                self._used.add(index)
                return {**recorded.result, "changed_by_person": recorded.changed}
        return None

    def answer(self, name: str, arguments: Any) -> dict[str, Any]:
        """The recorded outcome of this call, or `no_recorded_answer`. A call as the model asked for one the
        recording's person approved with changes is answered as that one ran, saying what they changed."""
        recorded = self._take(name, arguments)
        if recorded is None:
            return {"status": NO_RECORDED_ANSWER, "took_effect": False, "reason": NO_RECORDED_ANSWER_REASON}
        return dict(recorded)


def replay_settings(config: dict[str, Any]) -> dict[str, Any] | None:
    replay = config.get("replay")
    return replay if isinstance(replay, dict) else None


def recorded_answers(config: dict[str, Any], answered: list[tuple[str, Any]]) -> RecordedTools | None:
    """What answers the tool calls of a run with settings `config` (None: they run, as anywhere), given the calls
    it was answered before a worker took it up again (its own finished steps)."""
    replay = replay_settings(config)
    return RecordedTools(list(replay.get("recordings") or []), answered=answered) if replay is not None else None


def member_settings(config: dict[str, Any], spec: str, task: str) -> dict[str, Any]:
    """A member asked in a replay replays too: from the recordings of that member's runs."""
    replay = replay_settings(config)
    return {"replay": member_replay(replay, spec, task)} if replay is not None else {}


def member_replay(replay: dict[str, Any], spec: str, task: str = "") -> dict[str, Any]:
    """The replay settings of a member `spec` asked `task` by a replaying run: the recordings of that
    member's runs under the asking run's recordings, those asked the very same task first (a run that asked
    two members of one spec gets each its own answers, when the tasks read as recorded)."""
    found = [step["member_run"] for recording in replay.get("recordings") or []
             for step in recording.get("steps") or []
             if isinstance(step, dict) and isinstance(step.get("member_run"), dict)
             and step["member_run"].get("spec") == spec]
    found.sort(key=lambda recording: recording.get("task") != task)  # stable: the same task first
    return {**{key: value for key, value in replay.items() if key != "recordings"}, "recordings": found}
