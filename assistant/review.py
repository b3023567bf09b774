"""Reads for staff reviewing runs in the admin: a run as a timeline, and runs as CSV rows.

Admin-only: these read every owner's rows (the admin is the one place that does)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from assistant.markdown import render_markdown
from assistant.models import AgentMessage, AgentRun, AgentStep, step_counts

Kind = AgentStep.Kind
State = AgentStep.State

ARGUMENTS_PREVIEW_CHARS = 600
RESULT_PREVIEW_CHARS = 300
OTHER_RUNS_SHOWN = 10
#: A bar never narrower than this (percent of the axis), so an instant step still shows where it was.
MIN_BAR_PERCENT = 0.6


@dataclass(frozen=True)
class Effect:
    """What came of a step, as a mark and words a reviewer tells apart at a glance (`key` is its CSS hook)."""

    key: str
    mark: str
    words: str


DONE = Effect("done", "✓", "done")
READ = Effect("read", "◎", "read")
NO_EFFECT = Effect("no-effect", "∅", "no effect")
FAILED = Effect("failed", "✗", "failed")
UNKNOWN = Effect("unknown", "?", "outcome unknown")
WAITING = Effect("waiting", "⏸", "waiting for the person")
RUNNING = Effect("running", "…", "running")
NEVER_FINISHED = Effect("unknown", "?", "never finished")
MODEL = Effect("model", "→", "answered")
INTERRUPTED = Effect("interrupted", "⏹", "interrupted")
NOTICE = Effect("notice", "ℹ", "notice")

#: A tool outcome that did nothing for a stated reason (the arguments, the person's rights, their "no"),
#: as opposed to a tool or view that broke (`error`).
_FAILED_STATUSES = frozenset({"error"})


def step_effect(step: AgentStep, *, run_active: bool) -> Effect:
    """Read (a tool that only looks), done, no effect (with the step's reason), failed (the tool broke),
    or the step's state when it has no outcome yet."""
    if step.kind == Kind.NOTICE:
        return NOTICE
    if step.state == State.AWAITING_CONFIRMATION:
        return WAITING
    if step.state == State.STARTED:
        return RUNNING if run_active else NEVER_FINISHED
    result = step.result if isinstance(step.result, dict) else {}
    if step.kind == Kind.MODEL_CALL:
        return INTERRUPTED if step.took_effect is False or result.get("interrupted") else MODEL
    status = result.get("status")
    if step.took_effect:
        return DONE
    if status == "data":
        return READ
    if status in _FAILED_STATUSES:
        return FAILED
    if step.took_effect is None or status == "unknown":
        return UNKNOWN
    return NO_EFFECT


@dataclass(frozen=True)
class RunFigures:
    """A run's counts. While it is active its own columns still read 0 (they are totalled when it ends), so
    they are counted from its steps so far and marked `pending`."""

    model_calls: int
    tool_calls: int
    tool_errors: int
    prompt_tokens: int
    completion_tokens: int
    pending: bool

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def run_figures(run: AgentRun, steps: Iterable[AgentStep] | None = None) -> RunFigures:
    if not run.is_active:
        return RunFigures(run.model_calls, run.tool_calls, run.tool_errors, run.prompt_tokens,
                          run.completion_tokens, pending=False)
    # Counted as `run_finish` will count them, so the pending figures become the final ones.
    return RunFigures(**step_counts(run.steps.all() if steps is None else steps), pending=True)


@dataclass(frozen=True)
class TimelineStep:
    step: AgentStep
    effect: Effect
    arguments: str
    result: str
    start_ms: int
    duration_ms: int | None
    start_percent: float
    width_percent: float


@dataclass(frozen=True)
class RunTimeline:
    run: AgentRun
    question: str
    reply_html: str
    figures: RunFigures
    steps: list[TimelineStep]
    span_ms: int
    ticks: list[tuple[float, str]]
    other_runs: list[AgentRun]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any, limit: int) -> str:
    if value in (None, {}, []):
        return ""
    return _clip(json.dumps(value, ensure_ascii=False, default=str), limit)


def _result_preview(step: AgentStep) -> str:
    result = step.result if isinstance(step.result, dict) else step.result
    if step.kind == Kind.NOTICE:
        return step.reason
    if step.kind == Kind.MODEL_CALL and isinstance(result, dict):
        text = str(result.get("text") or "")
        calls = [str(call.get("name", "?")) for call in result.get("tool_calls") or () if isinstance(call, dict)]
        shown = text + (("\n" if text else "") + "→ calls " + ", ".join(calls) if calls else "")
        return _clip(shown, RESULT_PREVIEW_CHARS)
    return _json(result, RESULT_PREVIEW_CHARS)


def _step_span(step: AgentStep, *, now: datetime, run_active: bool) -> tuple[datetime, timedelta]:
    """When the step started, and how long it took (so far). A model call's row is written when the model
    answers, so it started `duration_ms` before its `created_at`; tool calls are written as they start."""
    took = timedelta(milliseconds=step.duration_ms or 0)
    if step.kind == Kind.MODEL_CALL:
        return step.created_at - took, took
    if step.state == State.STARTED and run_active and not step.duration_ms:
        return step.created_at, max(now - step.created_at, timedelta(0))
    return step.created_at, took


def _tick_label(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms < 60_000 else f"{ms / 60_000:.1f} min"


def run_timeline(run: AgentRun, *, now: datetime | None = None) -> RunTimeline:
    """`run`'s steps in order on one time axis from the run's start, with its figures, question, reply and
    the owner's other recent runs."""
    now = now or timezone.now()
    active = run.is_active
    steps = list(run.steps.order_by("seq"))
    origin = run.started_at or run.created_at
    spans = [_step_span(step, now=now, run_active=active) for step in steps]
    ends = [start + took for start, took in spans]
    end = max([origin, *ends, *([run.finished_at] if run.finished_at else []), *([now] if active else [])])
    span_ms = max(int((end - origin).total_seconds() * 1000), 1)

    timeline_steps = []
    for step, (start, took) in zip(steps, spans, strict=True):
        start_ms = max(int((start - origin).total_seconds() * 1000), 0)
        took_ms = int(took.total_seconds() * 1000)
        start_percent = round(min(start_ms / span_ms * 100, 100 - MIN_BAR_PERCENT), 2)
        width_percent = round(min(max(took_ms / span_ms * 100, MIN_BAR_PERCENT), 100 - start_percent), 2)
        shown_ms = step.duration_ms if step.duration_ms is not None or step.state != State.STARTED else took_ms
        timeline_steps.append(TimelineStep(
            step=step, effect=step_effect(step, run_active=active),
            arguments=_json(step.arguments, ARGUMENTS_PREVIEW_CHARS), result=_result_preview(step),
            start_ms=start_ms, duration_ms=shown_ms, start_percent=start_percent, width_percent=width_percent,
        ))
    question = (run.messages.filter(role=AgentMessage.Role.USER).order_by("id").values_list("content", flat=True)
                .first()) or ""
    return RunTimeline(
        run=run, question=question, reply_html=render_markdown(run.reply) if run.reply else "",
        figures=run_figures(run, steps), steps=timeline_steps, span_ms=span_ms,
        ticks=[(percent, _tick_label(span_ms * percent / 100)) for percent in (0, 50, 100)],
        other_runs=list(other_recent_runs(run)),
    )


def with_question(runs: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
    """`runs`, each annotated with `question`: the person's message that started it."""
    first_user_message = (AgentMessage.objects.filter(run=OuterRef("pk"), role=AgentMessage.Role.USER)
                          .order_by("id").values("content")[:1])
    return runs.annotate(question=Subquery(first_user_message))


def other_recent_runs(run: AgentRun, limit: int = OTHER_RUNS_SHOWN) -> QuerySet[AgentRun]:
    return with_question(AgentRun.objects.filter(owner_id=run.owner_id).exclude(pk=run.pk)
                         .order_by("-created_at"))[:limit]


# --- CSV ------------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "id", "created_at", "finished_at", "owner", "chat", "spec", "model", "status", "stop_reason", "error",
    "question", "reply", "model_calls", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens",
    "total_tokens", "duration_ms", "quality_score", "feedback_comment",
)
#: Counters a run totals only when it ends: blank in the CSV while it is active.
_COUNTERS = frozenset({"model_calls", "tool_calls", "tool_errors", "prompt_tokens", "completion_tokens",
                       "total_tokens", "duration_ms"})
# A cell starting with one of these is run as a formula by spreadsheet programs; a reply, an error or a
# question is anyone's text, so such a cell is written as text (OWASP's advice: a leading quote).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    return "'" + text if isinstance(value, str) and text.startswith(_FORMULA_STARTS) else text


def runs_csv_rows(runs: QuerySet[AgentRun], chunk_size: int = 500) -> Iterator[list[str]]:
    """The header, then one row per run of `runs`, in its order, read in chunks (for a streamed answer)."""
    yield list(CSV_COLUMNS)
    for run in with_question(runs.select_related("owner")).iterator(chunk_size=chunk_size):
        values: dict[str, Any] = {name: getattr(run, name) for name in CSV_COLUMNS if hasattr(run, name)}
        values["owner"] = run.owner.get_username()
        values["chat"] = run.chat_id
        if run.is_active:
            values.update(dict.fromkeys(_COUNTERS))
        yield [_cell(values.get(name)) for name in CSV_COLUMNS]
