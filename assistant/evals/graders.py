"""Grading a replay against its case's expectations: each grader says pass or fail and a score from 0 to 1.

The built-in graders, each applying only where the case's expectations ask for it:

- `trajectory` — the tool calls, against `expectations["trajectory"]`: `{"mode": ..., "calls": [{"tool",
  "arguments"}]}`. Modes: `exact` (the same calls, in the same order, no more), `in_order` (the expected calls
  appear in that order; others may come between), `any_order` (each expected call appears, in any order),
  `subset` (no call outside the expected ones). `expectations["arguments"]`: `"match"` (a call matches with
  equal arguments, as JSON) or `"ignore"` (by tool alone). Calls answered `no_recorded_answer` are named as
  deviations. Score: the share of expected calls matched (for `subset`, of calls made that were expected).
- `tools` — `must_call` / `must_not_call`: lists of tool names.
- `reply` — `{"nonempty": true, "contains": [...], "matches": "regex"}` on the replay's answer.
- `limits` — `{"max_steps", "max_tokens", "max_seconds"}`.
- `judge` — `rubric` (text): a model grades the answer against it, 0–1. It runs with the JUDGE_MODEL setting
  (else MODEL); the offline demo model and the scripted one cannot judge, and the grade says so (no score,
  not counted) rather than invent one.

A developer adds one with a small class — a `name` and a `grade(case, replay)` returning a `Grade`, or None
where the case asks nothing of it — listed by dotted path in the EVAL_GRADERS setting.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from django.utils.module_loading import import_string

from assistant.conf import assistant_settings
from assistant.evals.conf import evals_settings
from assistant.evals.replay import NO_RECORDED_ANSWER, canonical_arguments
from assistant.llm import Message, ModelError, get_model
from assistant.plans.offer import PLAN_TOOL


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: Any
    status: str = ""
    member: str = ""  # the member whose call it is ("" for the top run's own)


@dataclass
class Replayed:
    """What a replay (or, for the baseline, the recording itself) did, as the graders read it."""

    calls: list[Call]
    reply: str
    steps: int
    total_tokens: int
    duration_ms: int | None
    status: str = "succeeded"

    @classmethod
    def of_recording(cls, recording: dict[str, Any]) -> Replayed:
        steps = [step for step in recording.get("steps") or [] if isinstance(step, dict)]
        return cls(
            calls=_recorded_tree_calls(recording), reply=str(recording.get("reply") or ""), steps=len(steps),
            total_tokens=int((recording.get("usage") or {}).get("total_tokens") or 0),
            duration_ms=recording.get("duration_ms"), status=str(recording.get("status") or "succeeded"),
        )


def _recorded_tree_calls(recording: dict[str, Any], member: str = "") -> list[Call]:
    """A recording's calls as a replay's are read: each member's right after the step that asked it."""
    calls = []
    for step in recording.get("steps") or []:
        if not isinstance(step, dict) or step.get("kind") != "tool_call":
            continue
        calls.append(Call(str(step.get("tool", "")), step.get("arguments") or {},
                          str((step.get("result") or {}).get("status", "")), member))
        below = step.get("member_run")
        if isinstance(below, dict):
            calls.extend(_recorded_tree_calls(below, str(below.get("spec") or "")))
    return calls


@dataclass
class Grade:
    grader: str
    passed: bool | None  # None: it could not grade (a judge that is not there); not counted
    score: float | None
    detail: str = ""
    deviations: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Grader:
    name = ""

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        raise NotImplementedError


def _matches(expected: dict[str, Any], call: Call, by_arguments: bool) -> bool:
    """The same tool, and (matching by arguments) equal arguments; an expected call that names no arguments
    matches any."""
    if expected.get("tool") != call.tool or str(expected.get("member", "")) != call.member:
        return False
    if "arguments" not in expected:
        return True
    wanted = canonical_arguments(expected.get("arguments") or {})
    return not by_arguments or wanted == canonical_arguments(call.arguments)


def _shown(call: Call | dict[str, Any]) -> str:
    if isinstance(call, Call):
        tool, arguments, member = call.tool, call.arguments, call.member
    else:
        tool, arguments, member = str(call.get("tool", "")), call.get("arguments"), str(call.get("member", ""))
    shown = f"{tool}({json.dumps(arguments or {}, sort_keys=True, ensure_ascii=False, default=str)[:200]})"
    return f"{shown} by the member “{member}”" if member else shown


class TrajectoryGrader(Grader):
    name = "trajectory"

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        wanted = expectations.get("trajectory")
        if not isinstance(wanted, dict):
            return None
        mode = str(wanted.get("mode") or "in_order")
        expected = [call for call in wanted.get("calls") or [] if isinstance(call, dict)]
        by_arguments = expectations.get("arguments", "match") != "ignore"
        made = [call for call in replayed.calls if call.tool != PLAN_TOOL]  # a plan is how, not what
        deviations = [f"no recorded answer for {_shown(call)}" for call in made if call.status == NO_RECORDED_ANSWER]
        if mode == "exact":
            matched = sum(1 for want, call in zip(expected, made, strict=False) if _matches(want, call, by_arguments))
            passed = matched == len(expected) == len(made)
            if not passed:
                deviations.append(f"expected {[_shown(c) for c in expected]}, made {[_shown(c) for c in made]}")
            score = matched / max(len(expected), len(made)) if (expected or made) else 1.0
        elif mode == "in_order":
            position, matched = 0, 0
            for want in expected:
                while position < len(made) and not _matches(want, made[position], by_arguments):
                    position += 1
                if position < len(made):
                    matched, position = matched + 1, position + 1
                else:
                    deviations.append(f"missing, in order: {_shown(want)}")
            passed, score = matched == len(expected), (matched / len(expected) if expected else 1.0)
        elif mode == "any_order":
            left = list(made)
            matched = 0
            for want in expected:
                found = next((call for call in left if _matches(want, call, by_arguments)), None)
                if found is None:
                    deviations.append(f"missing: {_shown(want)}")
                else:
                    left.remove(found)
                    matched += 1
            passed, score = matched == len(expected), (matched / len(expected) if expected else 1.0)
        elif mode == "subset":
            outside = [call for call in made if not any(_matches(want, call, by_arguments) for want in expected)]
            deviations.extend(f"not expected: {_shown(call)}" for call in outside)
            passed = not outside
            score = 1 - len(outside) / len(made) if made else 1.0
        else:
            return Grade(self.name, False, 0.0, f"unknown trajectory mode {mode!r}")
        passed = passed and not any(call.status == NO_RECORDED_ANSWER for call in made)
        return Grade(self.name, passed, round(score, 4), f"{mode}, {'by arguments' if by_arguments else 'by tool'}",
                     deviations)


class ToolsGrader(Grader):
    name = "tools"

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        must, must_not = expectations.get("must_call") or [], expectations.get("must_not_call") or []
        if not must and not must_not:
            return None
        called = Counter(call.tool for call in replayed.calls)
        deviations = [f"did not call {name}" for name in must if not called[name]]
        deviations += [f"called {name}, which it must not" for name in must_not if called[name]]
        checks = len(must) + len(must_not)
        return Grade(self.name, not deviations, round(1 - len(deviations) / checks, 4), "", deviations)


class ReplyGrader(Grader):
    name = "reply"

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        wanted = expectations.get("reply")
        if not isinstance(wanted, dict) or not wanted:
            return None
        checks: list[tuple[str, bool]] = []
        if wanted.get("nonempty"):
            checks.append(("an answer", bool(replayed.reply.strip())))
        for text in wanted.get("contains") or []:
            checks.append((f"contains {text!r}", str(text).casefold() in replayed.reply.casefold()))
        pattern = wanted.get("matches")
        if pattern:
            try:
                checks.append((f"matches /{pattern}/", re.search(str(pattern), replayed.reply) is not None))
            except re.error as exc:
                checks.append((f"matches /{pattern}/ (not a valid pattern: {exc})", False))
        if not checks:
            return None
        failed = [what for what, ok in checks if not ok]
        return Grade(self.name, not failed, round(1 - len(failed) / len(checks), 4), "",
                     [f"the reply lacks {what}" for what in failed])


class LimitsGrader(Grader):
    name = "limits"

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        limits = expectations.get("limits")
        if not isinstance(limits, dict) or not limits:
            return None
        found = {"max_steps": replayed.steps, "max_tokens": replayed.total_tokens,
                 "max_seconds": (replayed.duration_ms or 0) / 1000}
        over = [f"{key[4:]} {found[key]:g} over {limits[key]:g}" for key in found
                if isinstance(limits.get(key), int | float) and found[key] > limits[key]]
        checks = sum(1 for key in found if isinstance(limits.get(key), int | float))
        return Grade(self.name, not over, round(1 - len(over) / checks, 4) if checks else 1.0, "", over)


#: Models that cannot judge: the offline demo model follows rules, and the scripted one replays a file.
_CANNOT_JUDGE = ("offline", "scripted:")


class JudgeGrader(Grader):
    """A model grades the answer against the case's rubric: 0–1, with its reason."""

    name = "judge"

    def grade(self, expectations: dict[str, Any], replayed: Replayed) -> Grade | None:
        rubric = expectations.get("rubric")
        if not rubric:
            return None
        model_name = str(evals_settings.JUDGE_MODEL or assistant_settings.MODEL)
        if any(model_name == name or model_name.startswith(name) for name in _CANNOT_JUDGE) or \
                model_name.split(",")[0].strip() == "offline":
            return Grade(self.name, None, None, f"not judged: the model {model_name!r} cannot judge (set JUDGE_MODEL "
                                                "to a provider's model)")
        prompt = ("Grade the assistant's answer against the rubric. Answer with JSON only: "
                  '{"score": <0..1>, "reason": "<one sentence>"}.')
        try:
            response = get_model(model_name).complete([
                Message.system(prompt),
                Message.user(json.dumps({"rubric": str(rubric), "answer": replayed.reply}, ensure_ascii=False)),
            ])
            verdict = json.loads(response.text.strip().removeprefix("```json").removesuffix("```"))
            score = min(1.0, max(0.0, float(verdict["score"])))
        except (ModelError, ValueError, KeyError, TypeError) as exc:
            return Grade(self.name, None, None, f"not judged: the judge's answer was unusable ({exc})")
        return Grade(self.name, score >= float(expectations.get("judge_pass", 0.5)), round(score, 4),
                     str(verdict.get("reason", ""))[:500])


BUILT_IN: tuple[Grader, ...] = (TrajectoryGrader(), ToolsGrader(), ReplyGrader(), LimitsGrader(), JudgeGrader())


def graders() -> list[Grader]:
    extra = [import_string(path)() for path in evals_settings.EVAL_GRADERS or []]
    return [*BUILT_IN, *extra]


def grade_all(expectations: dict[str, Any], replayed: Replayed) -> tuple[bool, float | None, list[Grade]]:
    """Every grader that applies: (passed, mean score, the grades). Passed when every counted grade passed."""
    grades = [grade for grader in graders() if (grade := grader.grade(expectations, replayed)) is not None]
    counted = [grade for grade in grades if grade.passed is not None]
    scores = [grade.score for grade in counted if grade.score is not None]
    if replayed.status != "succeeded":
        grades.insert(0, Grade("finished", False, 0.0, f"the replay ended {replayed.status}"))
        return False, 0.0, grades
    return all(grade.passed for grade in counted), (round(sum(scores) / len(scores), 4) if scores else None), grades
