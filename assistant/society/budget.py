"""A tree of runs shares its top run's budget: the model calls, tool calls and tokens of every member it asked
(and of those they asked) count inside the run that asked them, so no tree spends more than its top run's
limits; and a member's working time ends when the run that asked it must end.

The budget is reserved before a member starts: a child's own limits are what is left of its parent's — minus
what the parent used, what its ended children used and what its active children hold — shared among the
delegations of the same answer, and never more than the member's own limits. A child cannot spend past its
limits (its loop checks them), so however many delegations one answer asks for, together they stay within
what the parent had left. An ended child's use is counted from its rows, its own children's included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, Sum
from django.utils import timezone

from assistant.models import AgentRun, AgentStep

#: The limits a tree shares (the run's config keys). Working time is shared as a deadline instead.
SHARED_LIMITS = ("max_model_calls", "max_tool_calls", "max_tokens_per_run")
WALL = "max_wall_seconds"


class BudgetExhausted(Exception):
    """Nothing is left of a shared limit for another member: `limit` names it, `message` says it in words."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit, self.message = limit, message


@dataclass(frozen=True)
class Usage:
    model_calls: int = 0
    tool_calls: int = 0
    tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.model_calls + other.model_calls, self.tool_calls + other.tool_calls,
                     self.tokens + other.tokens)

    def of(self, limit: str) -> int:
        return {"max_model_calls": self.model_calls, "max_tool_calls": self.tool_calls,
                "max_tokens_per_run": self.tokens}[limit]


def _own_usage(run_ids: Iterable[int]) -> dict[int, Usage]:
    """Each run's own steps, in one query: its model calls, its tool calls (a delegation is one) and tokens."""
    return _usage_by_run(Q(run_id__in=list(run_ids)))


def _usage_by_run(steps: Q) -> dict[int, Usage]:
    rows = (AgentStep.objects.filter(steps).values("run_id")
            .annotate(model_calls=Count("id", filter=Q(kind=AgentStep.Kind.MODEL_CALL)),
                      tool_calls=Count("id", filter=Q(kind=AgentStep.Kind.TOOL_CALL)),
                      prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")))
    return {row["run_id"]: Usage(row["model_calls"], row["tool_calls"], (row["prompt"] or 0) + (row["completion"] or 0))
            for row in rows}


def subtree_run_ids(run_ids: Iterable[int]) -> list[int]:
    """These runs and every run below them (one query per level of the trees: at most MAX_DELEGATION_DEPTH)."""
    level = list(run_ids)
    ids = list(level)
    while level:
        level = list(AgentRun.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        ids.extend(level)
    return ids


def subtrees_usage(run_ids: list[int]) -> Usage:
    """What these runs and every run below them used together, from their rows (one query per level of the
    trees, plus one)."""
    return sum(_own_usage(subtree_run_ids(run_ids)).values(), Usage())


def tree_usage(run: AgentRun) -> Usage:
    """What `run` and every run below it used; for a top run, in one query (each of its members names it as the
    root of its tree)."""
    if run.parent_id is None:
        return sum(_usage_by_run(Q(run_id=run.pk) | Q(run__root_id=run.pk)).values(), Usage())
    return subtrees_usage([run.pk])


def _held(run: AgentRun, limits: Iterable[str]) -> dict[str, float]:
    """What `run`'s children hold or used of each limit: an active child its reservation, the ended ones
    what they (and their own children) used."""
    held = dict.fromkeys(limits, 0.0)
    ended = []
    for child in AgentRun.objects.filter(parent=run):
        if child.is_active:
            for limit in held:
                held[limit] += float((child.config or {}).get(limit, 0))
        else:
            ended.append(child.pk)
    if ended:
        used = subtrees_usage(ended)
        for limit in held:
            held[limit] += used.of(limit)
    return held


def remaining(run: AgentRun) -> dict[str, float]:
    """What is left of `run`'s shared limits for further members, and of its working time, now."""
    own = _own_usage([run.pk]).get(run.pk, Usage())
    held = _held(run, SHARED_LIMITS)
    left = {limit: float(run.setting(limit.upper())) - own.of(limit) - held[limit] for limit in SHARED_LIMITS}
    started = run.clock_started_at or run.started_at or run.created_at
    left[WALL] = float(run.setting(WALL.upper())) - (timezone.now() - started).total_seconds()
    return left


def reserve(run: AgentRun, member_limits: Mapping[str, Any], *, sharing: int = 1) -> dict[str, int | float]:
    """The limits of a new child of `run` whose member allows `member_limits`, when `sharing` delegations
    of the same answer (this one included) have yet to start: each gets an equal share of what is left,
    capped by its member's own limits. Raises BudgetExhausted when a share would be nothing."""
    if sharing < 1:
        raise ValueError("sharing counts this delegation too: at least 1")
    left = remaining(run)
    limits: dict[str, int | float] = {}
    for limit in SHARED_LIMITS:
        share = int(max(left[limit], 0) // sharing)
        limits[limit] = min(int(member_limits[limit]), share)
        if limits[limit] < 1:
            raise BudgetExhausted(limit, f"Nothing is left of this request's {_words[limit]} for another member.")
    limits[WALL] = min(float(member_limits[WALL]), left[WALL])
    if limits[WALL] <= 0:
        raise BudgetExhausted(WALL, "This request has no working time left for another member.")
    return limits


_words = {"max_model_calls": "model calls", "max_tool_calls": "tool calls", "max_tokens_per_run": "tokens"}
