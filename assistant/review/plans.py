"""A run's plan as staff review it (assistant/plans/ writes it): every revision, in order, with its steps'
statuses in words, the member each step was for, why a step failed or was skipped, links to the run's steps
that carried it out, and what changed against the revision before (steps kept, added, dropped).

The newest revision is the plan the run follows; its statuses are final once the run has ended. An older
revision keeps the statuses it had when the next one replaced it, so the page says so. The plans of a page's
whole tree are read in one query (`plans_by_run`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from assistant.models import AgentPlan, AgentRun, AgentStep
from assistant.review.marks import Effect

Status = AgentPlan.Status

#: A plan step's status as a mark and words, with the CSS hook of the timeline's mark of the same meaning
#: (done and failed read as the steps' own ✓ and ✗).
PLAN_STATUSES: Mapping[str, Effect] = {
    Status.DONE: Effect("done", "✓", "done"),
    Status.FAILED: Effect("failed", "✗", "failed"),
    Status.SKIPPED: Effect("skipped", "⤼", "skipped"),
    Status.IN_PROGRESS: Effect("running", "…", "in progress"),
    Status.PENDING: Effect("pending", "○", "pending"),
}
#: The order a revision's counts are said in: what became of its steps first.
_COUNT_ORDER = (Status.DONE, Status.FAILED, Status.SKIPPED, Status.IN_PROGRESS, Status.PENDING)

#: The person's answer to a plan that asked first (the spec's plan_approval), in words.
APPROVAL_WORDS: Mapping[str, str] = {
    AgentPlan.Approval.WAITING: "waiting for the person’s approval",
    AgentPlan.Approval.APPROVED: "approved by the person",
    AgentPlan.Approval.DENIED: "declined by the person",
    AgentPlan.Approval.COMMENTED: "not approved: the person asked for changes",
}


def plan_status(status: str) -> Effect:
    return PLAN_STATUSES.get(status) or Effect("unknown", "?", status or "unknown")


@dataclass(frozen=True)
class StepLink:
    """One of the run's steps a plan step points at: `anchor` is its row's id on this page ("" when it is not
    on it, and the link goes to the step's own record)."""

    step_id: int
    seq: int | None
    anchor: str
    tool: str = ""

    @property
    def label(self) -> str:
        return f"#{self.seq}" if self.seq is not None else f"step id {self.step_id}"


@dataclass(frozen=True)
class PlanStep:
    n: int
    do: str
    tool: str
    member: str
    member_note: str
    status: Effect
    why: str
    links: tuple[StepLink, ...]
    #: Against the revision before: "kept" or "added" ("" for a first revision).
    change: str = ""
    #: Its number in the revision before, when it was kept under another number.
    was: int | None = None


@dataclass(frozen=True)
class PlanRevision:
    plan: AgentPlan
    steps: list[PlanStep]
    #: The steps of the revision before that this one no longer has, as they were there.
    dropped: list[PlanStep]
    #: The planning step (`assistant_plan`) that wrote it.
    made_in: StepLink | None
    #: The newest revision: the plan the run follows.
    current: bool
    #: When the next revision replaced it (an older one).
    replaced_at: Any = None
    anchor: str = ""

    @property
    def revision(self) -> int:
        return self.plan.revision

    @property
    def changed_at(self) -> Any:
        """When its steps' statuses last changed, when that was a while after it was written (None if not)."""
        made = self.plan
        if made.updated_at and made.created_at and (made.updated_at - made.created_at).total_seconds() >= 1:
            return made.updated_at
        return None

    @property
    def previous_revision(self) -> int:
        return self.plan.revision - 1

    @property
    def next_revision(self) -> int:
        return self.plan.revision + 1

    @property
    def diff_words(self) -> str:
        """What changed against the revision before, in words: the steps kept, added and dropped, by number
        (a kept step's number there when it had another); "" for a first revision."""
        if self.plan.revision <= 1:
            return ""

        def numbers(steps: list[PlanStep], *, where: str = "") -> str:
            if not steps:
                return ""
            said = ", ".join(f"{step.n} (was {step.was})" if step.was is not None else str(step.n) for step in steps)
            return f" ({where}step{'s' if len(steps) > 1 else ''} {said})"

        kept, added, dropped = self.kept, self.added, self.dropped
        there = f"revision {self.previous_revision}’s "
        return (f"{len(kept)} kept{numbers(kept)}, {len(added)} added{numbers(added)}, "
                f"{len(dropped)} dropped{numbers(dropped, where=there)}")

    @property
    def kept(self) -> list[PlanStep]:
        return [step for step in self.steps if step.change == "kept"]

    @property
    def added(self) -> list[PlanStep]:
        return [step for step in self.steps if step.change == "added"]

    @property
    def counts(self) -> list[tuple[Effect, int]]:
        """How many of its steps have each status, in words' order; none that no step has."""
        found: dict[str, int] = {}
        for step in self.plan.steps:
            found[str(step.get("status"))] = found.get(str(step.get("status")), 0) + 1
        known = [(plan_status(status), found.pop(status)) for status in _COUNT_ORDER if status in found]
        return known + [(plan_status(status), count) for status, count in found.items()]

    @property
    def counts_words(self) -> str:
        total = len(self.steps)
        said = ", ".join(f"{count} {effect.words}" for effect, count in self.counts)
        return f"{total} step{'' if total == 1 else 's'}" + (f": {said}" if said else "")

    @property
    def approval_words(self) -> str:
        return APPROVAL_WORDS.get(self.plan.approval, "")


@dataclass(frozen=True)
class RunPlan:
    """A run's plan: its revisions, oldest first (the last is the one it follows)."""

    run: AgentRun
    revisions: list[PlanRevision]

    @property
    def current(self) -> PlanRevision:
        return self.revisions[-1]

    @property
    def revised(self) -> int:
        """How many times it was revised."""
        return len(self.revisions) - 1


def plans_by_run(run_ids: Iterable[int]) -> dict[int, list[AgentPlan]]:
    """The revisions of each of these runs' plans, oldest first, in one query."""
    found: dict[int, list[AgentPlan]] = {}
    for plan in AgentPlan.objects.filter(run_id__in=list(run_ids)).order_by("run_id", "revision"):
        found.setdefault(plan.run_id, []).append(plan)
    return found


def plan_anchor(run_id: int, revision: int) -> str:
    return f"plan-{run_id}-rev-{revision}"


def _key(step: Mapping[str, Any]) -> tuple[str, str]:
    return " ".join(str(step.get("do") or "").split()).casefold(), str(step.get("tool") or "")


def _matches(previous: list[Mapping[str, Any]], steps: list[Mapping[str, Any]]) -> dict[int, int]:
    """Which step of `previous` each of `steps` is, by index: first the steps carried over as they were
    (same number, same words, same tool), then a step planned again in the same words for the same tool
    under another number. A step of `steps` without a match was added; one of `previous`, dropped."""
    matched: dict[int, int] = {}
    taken: set[int] = set()
    for index, step in enumerate(steps):
        for before, old in enumerate(previous):
            if before not in taken and old.get("n") == step.get("n") and _key(old) == _key(step):
                matched[index] = before
                taken.add(before)
                break
    for index, step in enumerate(steps):
        if index in matched:
            continue
        for before, old in enumerate(previous):
            if before not in taken and _key(old) == _key(step):
                matched[index] = before
                taken.add(before)
                break
    return matched


def _link(step_id: Any, steps: Mapping[int, tuple[AgentStep, str]]) -> StepLink | None:
    if not isinstance(step_id, int):
        return None
    found = steps.get(step_id)
    if found is None:
        return StepLink(step_id=step_id, seq=None, anchor="")
    step, prefix = found
    return StepLink(step_id=step_id, seq=step.seq, anchor=f"{prefix}step-{step.seq}", tool=step.tool_name)


def _plan_step(raw: Mapping[str, Any], steps: Mapping[int, tuple[AgentStep, str]], *, change: str = "",
               was: int | None = None) -> PlanStep:
    links = [_link(step_id, steps) for step_id in raw.get("step_ids") or ()]
    number = raw.get("n")
    return PlanStep(
        n=number if isinstance(number, int) else 0, do=str(raw.get("do") or ""), tool=str(raw.get("tool") or ""),
        member=str(raw.get("member") or ""), member_note=str(raw.get("member_note") or ""),
        status=plan_status(str(raw.get("status") or "")), why=str(raw.get("why") or ""),
        links=tuple(link for link in links if link is not None), change=change, was=was,
    )


def run_plan(run: AgentRun, revisions: list[AgentPlan], steps: Mapping[int, tuple[AgentStep, str]]) -> RunPlan | None:
    """`run`'s plan from its `revisions` (oldest first), each step linked to the run's `steps` (each step on
    the page by id, with the prefix of its row's id); None for a run that made no plan."""
    if not revisions:
        return None
    shown: list[PlanRevision] = []
    for index, plan in enumerate(revisions):
        current = [step for step in plan.steps if isinstance(step, Mapping)]
        if index == 0:
            items = [_plan_step(step, steps) for step in current]
            dropped: list[PlanStep] = []
        else:
            previous = [step for step in revisions[index - 1].steps if isinstance(step, Mapping)]
            matched = _matches(previous, current)
            items = []
            for at, step in enumerate(current):
                before = matched.get(at)
                old_number = previous[before].get("n") if before is not None else None
                items.append(_plan_step(step, steps, change="kept" if before is not None else "added",
                                        was=old_number if before is not None and old_number != step.get("n")
                                        and isinstance(old_number, int) else None))
            left = set(range(len(previous))) - set(matched.values())
            dropped = [_plan_step(previous[at], steps) for at in sorted(left)]
        newest = index == len(revisions) - 1
        shown.append(PlanRevision(
            plan=plan, steps=items, dropped=dropped, made_in=_link(plan.made_in_id, steps), current=newest,
            replaced_at=None if newest else revisions[index + 1].created_at,
            anchor=plan_anchor(run.pk, plan.revision),
        ))
    return RunPlan(run=run, revisions=shown)
