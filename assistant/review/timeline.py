"""A run as staff review it in the admin: its steps on one time axis, with its figures, question and reply.

A run that handed work to members (assistant/society/) is shown as its tree: each member's run under the
delegation step that asked it (`asked_in`), with its own steps and figures, on the same time axis; the run's
own figures beside the totals of the run and everyone below it (each run's counters are its own only).
The whole tree is read in two queries, however many members it has, and the plans of all its runs in one
more (assistant/review/plans.py): each run's plan shows with it, a planning step links to the revision it wrote.

Admin-only: these read every owner's rows (the admin is the one place that does)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from assistant.live.markdown import render_markdown
from assistant.live.threads import message_siblings
from assistant.models import AgentAttachment, AgentMessage, AgentRun, AgentStep, step_counts
from assistant.plans.offer import PLAN_TOOL
from assistant.review.marks import Effect
from assistant.review.plans import RunPlan, plan_anchor, plans_by_run, run_plan
from assistant.tools.provenance import describe

Kind = AgentStep.Kind
State = AgentStep.State

ARGUMENTS_PREVIEW_CHARS = 600
RESULT_PREVIEW_CHARS = 300
OTHER_RUNS_SHOWN = 10
#: A member's task as its block under the step that asked it shows it (its own page has all of it).
TASK_PREVIEW_CHARS = 1000
#: A bar never narrower than this (percent of the axis), so an instant step still shows where it was.
MIN_BAR_PERCENT = 0.6


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
# A delegation (an `ask_<member>` step): its member's run is under it, and what it answered is its result.
WAITING_MEMBER = Effect("waiting-member", "⏳", "waiting for its member")
ANSWERED = Effect("answered", "↩", "answered")
ESCALATED = Effect("escalated", "⤴", "escalated")
# The planning tool's call (assistant/plans/): the plan it wrote is shown with the run's plan, and linked.
PLANNED = Effect("planned", "☰", "planned")

#: A tool outcome that did nothing for a stated reason (the arguments, the person's rights, their "no"),
#: as opposed to a tool or view that broke (`error`).
_FAILED_STATUSES = frozenset({"error"})


def is_delegation(step: AgentStep) -> bool:
    """A step that asked a member (its result names the member, or the member's run while it works)."""
    result = step.result if isinstance(step.result, dict) else {}
    return step.kind == Kind.TOOL_CALL and ("member" in result or "child_run_id" in result)


def step_effect(step: AgentStep, *, run_active: bool) -> Effect:
    """Read (a tool that only looks), done, no effect (with the step's reason), failed (the tool broke),
    or the step's state when it has no outcome yet. A delegation reads as its member's answer: done when
    something it did took effect, answered when nothing changed, escalated when it could not go on."""
    if step.kind == Kind.NOTICE:
        return NOTICE
    if step.state == State.AWAITING_CONFIRMATION:
        return WAITING
    result = step.result if isinstance(step.result, dict) else {}
    delegation = is_delegation(step)
    if step.state == State.STARTED:
        if not run_active:
            return NEVER_FINISHED
        return WAITING_MEMBER if delegation else RUNNING
    if delegation and result.get("status") == "answered":
        return DONE if step.took_effect else UNKNOWN if step.took_effect is None else ANSWERED
    if delegation and result.get("status") == "escalated":
        return ESCALATED
    if step.kind == Kind.MODEL_CALL:
        return INTERRUPTED if step.took_effect is False or result.get("interrupted") else MODEL
    status = result.get("status")
    if step.tool_name == PLAN_TOOL and status == "planned":
        return PLANNED
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
    total_tokens: int
    pending: bool
    #: What its model calls cost (the CURRENCY setting); None when none had a price.
    cost: Decimal | None = None


def run_figures(run: AgentRun, steps: Iterable[AgentStep] | None = None) -> RunFigures:
    if not run.is_active:
        return RunFigures(run.model_calls, run.tool_calls, run.tool_errors, run.prompt_tokens,
                          run.completion_tokens, run.total_tokens, pending=False, cost=run.cost)
    # Counted as `run_finish` will count them, so the pending figures become the final ones.
    counts = step_counts(run.steps.all() if steps is None else steps)
    return RunFigures(**counts, total_tokens=counts["prompt_tokens"] + counts["completion_tokens"], pending=True)


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
    #: Why it did not take effect (or why its member escalated), when it says.
    reason: str = ""
    #: The members' runs this step asked (a delegation's), each with its own steps.
    members: tuple[MemberRun, ...] = ()
    #: The plan revision this step wrote (a call of the planning tool): its number and its block's id.
    plan_revision: int | None = None
    plan_anchor: str = ""
    #: What the model asked for, when the person approved the call with changed values (`arguments` ran).
    asked_arguments: str = ""


@dataclass(frozen=True)
class MemberRun:
    """A member's run as it shows under the step that asked it: its own figures and steps, and the members
    it asked in turn. `level` is how far below the page's run it is (1: asked by it)."""

    run: AgentRun
    level: int
    task: str
    figures: RunFigures
    duration_ms: int | None
    steps: list[TimelineStep]
    #: Members it asked whose asking step is not among its steps (a step since deleted): shown after them.
    unplaced: list[MemberRun]
    #: Its plan, every revision of it; None when it made none.
    plan: RunPlan | None = None

    @property
    def anchor(self) -> str:
        return f"run-{self.run.pk}-"

    @property
    def label(self) -> str:
        return f"Steps of run {self.run.pk} ({self.run.spec})"


@dataclass(frozen=True)
class TreeTotals:
    """A run with everyone below it: each figure the sum of every run's own (a run's counters are its own
    only), `pending` while any of them is active. `wall_ms` is the run's own time from its start to its end
    (its members' time inside it); `members_ms` the members' runs' times added up."""

    runs: int
    model_calls: int
    tool_calls: int
    tool_errors: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    wall_ms: int | None
    members_ms: int
    pending: bool
    #: What every run's model calls cost together; None when none had a price.
    cost: Decimal | None = None

    @property
    def members(self) -> int:
        return self.runs - 1


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
    #: The run that asked this one, the step of it that did, and the top run of its tree (a member's run).
    asked_by: AgentRun | None = None
    asked_in: AgentStep | None = None
    top: AgentRun | None = None
    #: The members this run asked, in the order they were asked; those whose step is unknown, shown last.
    members: list[MemberRun] = field(default_factory=list)
    unplaced: list[MemberRun] = field(default_factory=list)
    #: This run with everyone below it; None when it asked nobody.
    totals: TreeTotals | None = None
    #: Its plan, every revision of it (None when it made none); and whether any run on the page planned.
    plan: RunPlan | None = None
    planned: bool = False
    #: Whose text the run read (its label, docs/security.md), in words, with the step that read it (None when
    #: no step of its own did: the page it was asked from, a recalled memory, the run that asked it).
    others_text: list[tuple[str, int | None]] = field(default_factory=list)
    #: Where its question and its answer stand among their branches (assistant/live/threads.py), when they have
    #: any: an edited question, an answer given again.
    branches: list[RunBranch] = field(default_factory=list)
    #: The files the person sent with its question (assistant/attachments/), oldest first.
    attachments: list[AgentAttachment] = field(default_factory=list)


@dataclass(frozen=True)
class RunBranch:
    """The run's question or answer among its siblings: `position` of `count`, and the runs of the others."""

    what: str  # "question" or "answer"
    position: int
    count: int
    other_runs: list[int]


def _exchange(run: AgentRun) -> tuple[AgentMessage | None, AgentMessage | None]:
    """A top run's question (the person's message that opened it, or the one it answers again) and its answer:
    one query."""
    rows = list(AgentMessage.objects.filter(Q(run_id=run.pk) | Q(pk=run.answers_again_id))
                .exclude(role=AgentMessage.Role.SUMMARY).order_by("id"))
    asked = [row for row in rows if row.role == AgentMessage.Role.USER]
    question = next((row for row in asked if row.pk == run.answers_again_id), asked[0] if asked else None)
    answer = next((row for row in rows if row.role == AgentMessage.Role.ASSISTANT and row.run_id == run.pk), None)
    return question, answer


def run_branches(run: AgentRun, question: AgentMessage | None, answer: AgentMessage | None) -> list[RunBranch]:
    """Where a top run's question and answer stand among their branches; [] when neither has any (a chat its
    person never branched has none: no query)."""
    if run.parent_id is not None or run.chat.leaf_id is None:
        return []
    shown = [message for message in (question, answer) if message is not None]
    kin = message_siblings(shown)
    forks = {message.pk: kin[message.pk] for message in shown if len(kin.get(message.pk, [])) > 1}
    if not forks:
        return []
    runs_of = dict(AgentMessage.objects.filter(pk__in=[i for ids in forks.values() for i in ids])
                   .values_list("pk", "run_id"))
    branches = []
    for message in shown:
        ids = forks.get(message.pk)
        if ids is not None:
            others = [runs_of[other] for other in ids if other != message.pk and runs_of.get(other)]
            branches.append(RunBranch(what="question" if message.role == AgentMessage.Role.USER else "answer",
                                      position=ids.index(message.pk) + 1, count=len(ids), other_runs=others))
    return branches


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


def _bar(start_ms: int, took_ms: int, span_ms: int) -> tuple[float, float]:
    start_percent = round(min(start_ms / span_ms * 100, 100 - MIN_BAR_PERCENT), 2)
    width_percent = round(min(max(took_ms / span_ms * 100, MIN_BAR_PERCENT), 100 - start_percent), 2)
    return start_percent, width_percent


def _run_tree(run: AgentRun) -> tuple[dict[int, AgentRun], dict[int | None, list[AgentRun]], list[AgentRun]]:
    """`run`'s tree in one query: every run of it by id, each run's children in the order they were asked,
    and the runs below `run` (the ones its page shows). A top run's tree is the runs whose root it is; a
    member's page reads its whole tree too, for the runs above it."""
    top_id = run.root_id or run.pk
    tree = AgentRun.objects.filter(Q(root_id=top_id) | Q(pk=top_id)).exclude(pk=run.pk)
    by_id = {other.pk: other for other in tree.defer("config", "session_sealed").order_by("created_at", "pk")}
    by_id[run.pk] = run
    children: dict[int | None, list[AgentRun]] = {}
    for other in by_id.values():
        children.setdefault(other.parent_id, []).append(other)
    for siblings in children.values():
        siblings.sort(key=lambda other: (other.created_at, other.pk))
    below: list[AgentRun] = []
    level, seen = [run], {run.pk}
    while level:
        level = [child for parent in level for child in children.get(parent.pk, []) if child.pk not in seen]
        seen.update(child.pk for child in level)
        below.extend(level)
    return by_id, children, below


def run_timeline(run: AgentRun, *, now: datetime | None = None) -> RunTimeline:
    """`run`'s steps in order on one time axis from the run's start, with its figures, question, reply and
    the owner's other recent runs; each member's run it asked (and those they asked) under the step that
    asked it, on the same axis, and the totals of them all."""
    now = now or timezone.now()
    by_id, children, below = _run_tree(run)
    subtree = [run, *below]
    subtree_ids = {member.pk for member in subtree}
    wanted = Q(run_id__in=subtree_ids)
    if run.asked_in_id is not None:
        wanted |= Q(pk=run.asked_in_id)
    steps_by_run: dict[int, list[AgentStep]] = {}
    asked_in = None
    for step in AgentStep.objects.filter(wanted).order_by("run_id", "seq"):
        if step.pk == run.asked_in_id:
            asked_in = step
        if step.run_id in subtree_ids:
            steps_by_run.setdefault(step.run_id, []).append(step)

    # Every plan of the page's runs (one query), each step of theirs linked to its row on this page.
    revisions = plans_by_run(subtree_ids)
    on_page = {step.pk: (step, "" if owner == run.pk else f"run-{owner}-")
               for owner, owned in steps_by_run.items() for step in owned}
    plans = {owner: run_plan(by_id[owner], owned, on_page) for owner, owned in revisions.items()}
    wrote = {plan.made_in_id: plan for owned in revisions.values() for plan in owned if plan.made_in_id}

    origin = run.started_at or run.created_at
    spans = {member.pk: [_step_span(step, now=now, run_active=member.is_active)
                         for step in steps_by_run.get(member.pk, [])] for member in subtree}
    ends = [start + took for member_spans in spans.values() for start, took in member_spans]
    ends += [member.finished_at for member in subtree if member.finished_at]
    if any(member.is_active for member in subtree):
        ends.append(now)
    span_ms = max(int((max([origin, *ends]) - origin).total_seconds() * 1000), 1)
    figures = {member.pk: run_figures(member, steps_by_run.get(member.pk, [])) for member in subtree}

    def timeline_steps(owner: AgentRun, members: dict[int, list[MemberRun]]) -> list[TimelineStep]:
        items = []
        for step, (start, took) in zip(steps_by_run.get(owner.pk, []), spans[owner.pk], strict=True):
            start_ms = max(int((start - origin).total_seconds() * 1000), 0)
            took_ms = int(took.total_seconds() * 1000)
            start_percent, width_percent = _bar(start_ms, took_ms, span_ms)
            shown_ms = step.duration_ms if step.duration_ms is not None or step.state != State.STARTED else took_ms
            result = step.result if isinstance(step.result, dict) else {}
            written = wrote.get(step.pk)
            items.append(TimelineStep(
                step=step, effect=step_effect(step, run_active=owner.is_active),
                arguments=_json(step.arguments, ARGUMENTS_PREVIEW_CHARS), result=_result_preview(step),
                start_ms=start_ms, duration_ms=shown_ms, start_percent=start_percent, width_percent=width_percent,
                reason=step.reason or (str(result.get("reason") or "") if is_delegation(step) else ""),
                members=tuple(members.get(step.pk, ())),
                plan_revision=written.revision if written else None,
                plan_anchor=plan_anchor(owner.pk, written.revision) if written else "",
                asked_arguments=_json(step.asked_arguments, ARGUMENTS_PREVIEW_CHARS)
                if step.asked_arguments is not None else "",
            ))
        return items

    def members_of(owner: AgentRun, level: int) -> tuple[list[TimelineStep], list[MemberRun], list[MemberRun]]:
        """`owner`'s steps with its members under theirs, all its members, and those placed under none."""
        step_ids = {step.pk for step in steps_by_run.get(owner.pk, [])}
        placed: dict[int, list[MemberRun]] = {}
        every, unplaced = [], []
        for child in children.get(owner.pk, []):
            if child.pk in built:  # only a corrupt tree has a cycle; show each run once
                continue
            built.add(child.pk)
            node = member_run(child, level)
            every.append(node)
            if child.asked_in_id in step_ids:
                placed.setdefault(child.asked_in_id, []).append(node)
            else:
                unplaced.append(node)
        return timeline_steps(owner, placed), every, unplaced

    def member_run(member: AgentRun, level: int) -> MemberRun:
        steps, _, unplaced = members_of(member, level + 1)
        return MemberRun(run=member, level=level, task=_clip(member.task, TASK_PREVIEW_CHARS),
                         figures=figures[member.pk], duration_ms=_took_ms(member, now), steps=steps,
                         unplaced=unplaced, plan=plans.get(member.pk))

    built = {run.pk}
    steps, members, unplaced = members_of(run, 1)
    asked, answer = _exchange(run) if run.parent_id is None else (None, None)
    question = run.task if run.parent_id is not None else asked.content if asked is not None else ""
    return RunTimeline(
        run=run, question=question, reply_html=render_markdown(run.reply) if run.reply else "",
        figures=figures[run.pk], steps=steps, span_ms=span_ms,
        ticks=[(percent, _tick_label(span_ms * percent / 100)) for percent in (0, 50, 100)],
        other_runs=list(other_recent_runs(run)),
        asked_by=by_id.get(run.parent_id) if run.parent_id else None, asked_in=asked_in,
        top=by_id.get(run.root_id) if run.root_id else None,
        members=members, unplaced=unplaced,
        totals=_totals(run, below, figures, now) if below else None,
        plan=plans.get(run.pk), planned=bool(revisions), others_text=others_text_read(run),
        branches=run_branches(run, asked, answer),
        # Only a run sent with files looks them up (its config names them).
        attachments=list(asked.attachments.all()) if asked is not None and (run.config or {}).get("attachments")
        else [],
    )


def others_text_read(run: AgentRun) -> list[tuple[str, int | None]]:
    """The run's label as staff read it: for each step that read someone else's text (in the order read), whose
    and what; then what came from no step of the run's own."""
    by_step: dict[int | None, list[dict[str, Any]]] = {}
    for source in run.others_text or []:
        if isinstance(source, dict):
            step = source.get("step")
            by_step.setdefault(step if isinstance(step, int) else None, []).append(source)
    ordered = sorted(by_step, key=lambda step: (step is None, step or 0))
    return [(describe(by_step[step]), step) for step in ordered]


def _took_ms(run: AgentRun, now: datetime) -> int | None:
    """A run's time from its start to its end; so far while it is active (None before it starts)."""
    if not run.is_active:
        return run.duration_ms
    if run.started_at is None:
        return None
    return max(int((now - run.started_at).total_seconds() * 1000), 0)


def _totals(run: AgentRun, below: list[AgentRun], figures: dict[int, RunFigures], now: datetime) -> TreeTotals:
    every = [figures[member.pk] for member in (run, *below)]
    return TreeTotals(
        runs=len(every),
        model_calls=sum(each.model_calls for each in every), tool_calls=sum(each.tool_calls for each in every),
        tool_errors=sum(each.tool_errors for each in every),
        prompt_tokens=sum(each.prompt_tokens for each in every),
        completion_tokens=sum(each.completion_tokens for each in every),
        total_tokens=sum(each.total_tokens for each in every),
        wall_ms=_took_ms(run, now), members_ms=sum(_took_ms(member, now) or 0 for member in below),
        pending=any(each.pending for each in every),
        cost=sum(costs, Decimal(0)) if (costs := [each.cost for each in every if each.cost is not None]) else None,
    )


def with_question(runs: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
    """`runs`, each annotated with `question`: the person's message that started it, or that it answers again."""
    first_user_message = (AgentMessage.objects.filter(run=OuterRef("pk"), role=AgentMessage.Role.USER)
                          .order_by("id").values("content")[:1])
    return runs.annotate(question=Coalesce(Subquery(first_user_message), F("answers_again__content")))


def other_recent_runs(run: AgentRun, limit: int = OTHER_RUNS_SHOWN) -> QuerySet[AgentRun]:
    return with_question(AgentRun.objects.filter(owner_id=run.owner_id).exclude(pk=run.pk)
                         .order_by("-created_at"))[:limit]
