"""Eval runs: each case of a set replayed against each candidate, on the workers, graded when its replay ends.

A replay is an ordinary run of channel `eval` — queued, claimed, leased, swept up after a worker dies — in a
chat of its own that its person never sees, whose settings carry the case's recording: its tool calls are
answered from it (replay.py), never by running a view, and it writes nothing of the person's
(no memories, no profile entry, no events). The candidate's model is called for real. When the replay ends
(`run_ended`), its result is graded once (a conditional update); `eval_run_refresh` grades any whose signal
was lost with a worker, and closes the eval run when none is left pending.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.dispatch import Signal, receiver
from django.utils import timezone

from assistant.evals.channel import EVAL
from assistant.evals.graders import Call, Replayed, grade_all
from assistant.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from assistant.infra.worker_queue import run_enqueue
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs.lifecycle import run_config, run_ended, run_open
from assistant.society.members import member

logger = logging.getLogger(__name__)


class EvalRefused(Exception):
    """The eval run cannot start as asked; `message` says why. Nothing was made."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Candidate:
    """What a replay runs with. None keeps the case's own spec, and the spec's current model and instructions."""

    label: str
    model: str | None = None
    instructions: str | None = None
    spec: str | None = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> Candidate:
        return cls(label=str(data["label"]), model=data.get("model"), instructions=data.get("instructions"),
                   spec=data.get("spec"))


def _baseline_run(eval_set: EvalSet, baseline: str) -> EvalRun | None:
    if baseline == "recorded":
        return None
    earlier = EvalRun.objects.filter(pk=int(baseline), eval_set=eval_set).first() if baseline.isdigit() else None
    if earlier is None:
        raise EvalRefused(f"The baseline is \"recorded\" or an earlier eval run of the set {eval_set.name!r}, "
                          f"not {baseline!r}.")
    return earlier


def eval_run_start(eval_set: EvalSet, candidates: list[Candidate], *, baseline: str = "recorded",
                   by: Any = None) -> EvalRun:
    """Replay every case of `eval_set` against each candidate: the eval run and its replays, queued for the
    workers when this commits. EvalRefused, making nothing, for a set without cases, an unknown spec, two
    candidates of one label or a baseline that is not one."""
    if not candidates:
        raise EvalRefused("Name at least one candidate.")
    if len({candidate.label for candidate in candidates}) != len(candidates):
        raise EvalRefused("Each candidate needs a label of its own.")
    for candidate in candidates:
        if candidate.spec is not None:
            try:
                member(candidate.spec)
            except ValueError as unknown:
                raise EvalRefused(str(unknown)) from None
    cases = list(eval_set.cases.select_related("owner").order_by("id"))
    if not cases:
        raise EvalRefused(f"The set {eval_set.name!r} has no cases yet.")
    _baseline_run(eval_set, baseline)
    with transaction.atomic():
        eval_run = EvalRun.objects.create(eval_set=eval_set, candidates=[asdict(c) for c in candidates],
                                          baseline=baseline, created_by=by)
        for case in cases:
            for candidate in candidates:
                result = EvalResult.objects.create(eval_run=eval_run, case=case, candidate=candidate.label)
                _replay_start(result, case, candidate)
    return eval_run


def _replay_start(result: EvalResult, case: EvalCase, candidate: Candidate) -> None:
    if case.owner is None:
        result.status, result.error = EvalResult.Status.ERROR, (
            f"The case's person “{case.owner_username}” is not on this site: a replay acts as them.")
        result.save(update_fields=["status", "error"])
        return
    spec = candidate.spec or case.spec
    config = run_config(spec=spec)
    if candidate.model:
        config["model"] = candidate.model
    if candidate.instructions:
        config["instructions"] = candidate.instructions
    config["replay"] = {"recordings": [case.recording], "case": case.pk, "eval_run": result.eval_run_id}
    if case.recording.get("page"):
        config["page"] = case.recording["page"]
    chat = AgentChat.objects.create(owner=case.owner, spec=spec, channel=EVAL.value,
                                    title=f"Replay of case {case.pk} ({case.eval_set.name}, {candidate.label})"[:200])
    # The conversation as one branch, each message following the one before, as the person's chat read.
    follows = None
    for message in case.conversation:
        follows = AgentMessage.objects.create(chat=chat, owner=case.owner, role=message["role"],
                                              content=message["content"], parent=follows)
    run = run_open(owner=case.owner, chat=chat, spec=spec, config=config, channel=EVAL.value)
    run.save(force_insert=True)
    AgentMessage.objects.create(chat=chat, owner=case.owner, role=AgentMessage.Role.USER, content=case.question,
                                run=run, parent=follows)
    result.replay_run = run
    result.save(update_fields=["replay_run"])
    run_enqueue(run.pk)


def _tree_calls(run: AgentRun, members: dict[int, AgentRun], member: str = "") -> list[Call]:
    calls = []
    for step in run.steps.filter(kind=AgentStep.Kind.TOOL_CALL).order_by("seq"):
        result = step.result or {}
        calls.append(Call(step.tool_name, step.arguments, str(result.get("status", "")), member))
        asked = result.get("child_run_id")
        if isinstance(asked, int) and asked in members:
            calls.extend(_tree_calls(members[asked], members, members[asked].spec))
    return calls


def replayed_of(run: AgentRun) -> Replayed:
    """What a replay did, as the graders read it: its tool calls, each member's right after the step that
    asked it (as a case's recording lists them), its reply, and its figures with its members'."""
    members = {below.pk: below for below in AgentRun.objects.filter(root=run)}
    tree_tokens = sum(below.total_tokens for below in members.values())
    return Replayed(
        calls=_tree_calls(run, members), reply=run.reply, steps=run.steps.count(),
        total_tokens=run.total_tokens + tree_tokens, duration_ms=run.duration_ms, status=run.status,
    )


def result_grade(result: EvalResult) -> bool:
    """Grade a result whose replay has ended, once: False when it was graded already or is not ready."""
    run = result.replay_run
    if run is None or run.is_active:
        return False
    replayed = replayed_of(run)
    passed, score, grades = grade_all(result.case.expectations or {}, replayed)
    done = EvalResult.objects.filter(pk=result.pk, status=EvalResult.Status.PENDING).update(
        status=EvalResult.Status.GRADED, passed=passed, score=score, grades=[grade.as_json() for grade in grades],
        total_tokens=replayed.total_tokens, duration_ms=replayed.duration_ms, graded_at=timezone.now(),
    )
    return bool(done)


#: Sent once when an eval run has every result graded (or not replayable), with `eval_run_id`.
eval_run_finished = Signal()


def _close_if_done(eval_run_id: int) -> None:
    if not EvalResult.objects.filter(eval_run_id=eval_run_id, status=EvalResult.Status.PENDING).exists():
        closed = EvalRun.objects.filter(pk=eval_run_id, status=EvalRun.Status.RUNNING).update(
            status=EvalRun.Status.FINISHED, finished_at=timezone.now())
        if closed:  # one conditional update: whichever grade closed it announces it, once
            eval_run_finished.send(sender=EvalRun, eval_run_id=eval_run_id)


@receiver(run_ended, dispatch_uid="assistant.evals.grade_on_end")
def grade_on_end(sender: Any, run_id: int, **kwargs: Any) -> None:
    result = EvalResult.objects.select_related("replay_run", "case").filter(replay_run_id=run_id).first()
    if result is None:
        return
    try:
        result_grade(result)
    except Exception:  # graded later by eval_run_refresh: a grader's fault must not break a worker
        logger.exception("Could not grade eval result %s; it is graded when its eval run is looked at", result.pk)
        return
    _close_if_done(result.eval_run_id)


def eval_run_refresh(eval_run: EvalRun) -> EvalRun:
    """Grade what ended without being graded (its worker died after the end), and close the run if all are."""
    waiting = eval_run.results.filter(status=EvalResult.Status.PENDING, replay_run__isnull=False).exclude(
        replay_run__status__in=AgentRun.ACTIVE_STATUSES).select_related("replay_run", "case")
    for result in waiting:
        result_grade(result)
    _close_if_done(eval_run.pk)
    eval_run.refresh_from_db()
    return eval_run


def eval_run_progress(eval_run: EvalRun) -> tuple[int, int]:
    """(results no longer pending, all results)."""
    total = eval_run.results.count()
    return total - eval_run.results.filter(status=EvalResult.Status.PENDING).count(), total
