"""Retention: the assistant's evidence leaves by age, through `manage.py assistant_prune`, never the admin.

Runs created before the cut-off go with their steps, plans and messages; chats that have nothing left go too;
memories created before the cut-off go. A run still active (queued, running, waiting for its person)
stays, with everything of it, however old it is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentPlan, AgentRun, AgentStep

_AGE = re.compile(r"(?P<amount>\d+)(?P<unit>[hdw])")
_UNITS = {"h": ("hours", "hour"), "d": ("days", "day"), "w": ("weeks", "week")}


class InvalidAge(ValueError):
    """An age that is missing, not of the form `90d` / `12w` / `48h`, zero, or too large."""


@dataclass(frozen=True)
class Age:
    delta: timedelta
    words: str


def parse_age(text: str | None) -> Age:
    """`90d`, `12w` or `48h` as a positive duration; anything else raises InvalidAge saying what is accepted."""
    accepted = "an age such as 90d (days), 12w (weeks) or 48h (hours)"
    match = _AGE.fullmatch((text or "").strip())
    if match is None:
        raise InvalidAge(f"--older-than needs {accepted}; got {text!r}.")
    amount, unit = int(match["amount"]), match["unit"]
    if amount == 0:
        raise InvalidAge(f"--older-than must be more than zero ({accepted}); {text!r} would delete everything.")
    plural, singular = _UNITS[unit]
    try:
        delta = timedelta(**{plural: amount})
        timezone.now() - delta  # noqa: B018  (a cut-off before year 1 cannot be expressed)
    except OverflowError:
        raise InvalidAge(f"--older-than {text!r} is too large.") from None
    return Age(delta, f"{amount} {singular if amount == 1 else plural}")


@dataclass(frozen=True)
class Pruned:
    """How many rows of each kind went (or would go), before `cutoff`."""

    cutoff: datetime
    runs: int
    steps: int
    messages: int
    chats: int
    memories: int
    plans: int = 0

    def counts(self) -> list[tuple[int, str, str]]:
        return [(self.runs, "run", "runs"), (self.steps, "step", "steps"), (self.plans, "plan revision",
                "plan revisions"), (self.messages, "message", "messages"), (self.chats, "chat", "chats"),
                (self.memories, "memory", "memories")]


#: Rows deleted per transaction: a large backlog goes in short transactions that hold few locks, and a
#: prune cut short (a deploy, Ctrl-C) has deleted whole runs only and simply goes on when run again.
BATCH_SIZE = 1000


def _doomed(cutoff: datetime) -> tuple[QuerySet[AgentRun], QuerySet[AgentStep], QuerySet[AgentMessage],
                                       QuerySet[AgentChat], QuerySet[AgentMemory]]:
    """What a prune at `cutoff` deletes, as querysets (read before anything is deleted)."""
    runs = AgentRun.objects.filter(created_at__lt=cutoff).exclude(status__in=AgentRun.ACTIVE_STATUSES)
    steps = AgentStep.objects.filter(run__in=runs)
    # A run's messages are its own; a message of no run (a summary of older messages) goes by its own age.
    messages = AgentMessage.objects.filter(Q(run__in=runs) | Q(run__isnull=True, created_at__lt=cutoff))
    # A chat goes when it is older than the cut-off and nothing of it stays: a new chat with no message yet,
    # or a chat with an active or newer run, is kept.
    staying_runs = AgentRun.objects.filter(chat=OuterRef("pk")).exclude(pk__in=runs.values("pk"))
    staying_messages = AgentMessage.objects.filter(chat=OuterRef("pk")).exclude(pk__in=messages.values("pk"))
    chats = AgentChat.objects.filter(created_at__lt=cutoff).exclude(Exists(staying_runs)).exclude(
        Exists(staying_messages))
    memories = AgentMemory.objects.filter(created_at__lt=cutoff)
    return runs, steps, messages, chats, memories


def _deleted(rows: QuerySet[Any]) -> int:
    """Delete `rows`; how many rows of their own model went (not counting anything cascaded)."""
    return rows.delete()[1].get(rows.model._meta.label, 0)


def _in_batches(rows: QuerySet[Any], batch_size: int, *, cascaded: dict[str, int] | None = None) -> int:
    """Delete `rows` a batch at a time; how many went. With `cascaded` (runs), each batch's steps and messages
    go first, and are counted into it."""
    total = 0
    while True:
        with transaction.atomic():
            ids = list(rows.order_by("pk").values_list("pk", flat=True)[:batch_size])
            if not ids:
                return total
            if cascaded is not None:
                cascaded["plans"] += _deleted(AgentPlan.objects.filter(run_id__in=ids))
                cascaded["steps"] += _deleted(AgentStep.objects.filter(run_id__in=ids))
                cascaded["messages"] += _deleted(AgentMessage.objects.filter(run_id__in=ids))
            total += _deleted(rows.model.objects.filter(pk__in=ids))


def evidence_prune(*, older_than: timedelta, dry_run: bool, now: datetime | None = None,
                   batch_size: int = BATCH_SIZE) -> Pruned:
    """Delete (or, with `dry_run`, only count) the evidence created more than `older_than` ago. The counts
    are of what was deleted (or would be)."""
    cutoff = (now or timezone.now()) - older_than
    runs, steps, messages, chats, memories = _doomed(cutoff)
    if dry_run:
        return Pruned(cutoff=cutoff, runs=runs.count(), steps=steps.count(), messages=messages.count(),
                      chats=chats.count(), memories=memories.count(),
                      plans=AgentPlan.objects.filter(run__in=runs).count())
    cascaded = {"steps": 0, "messages": 0, "plans": 0}
    run_count = _in_batches(runs, batch_size, cascaded=cascaded)
    orphans = _in_batches(AgentMessage.objects.filter(run__isnull=True, created_at__lt=cutoff), batch_size)
    # With their runs and messages gone, the chats left empty are those with nothing at all.
    empty_chats = (AgentChat.objects.filter(created_at__lt=cutoff)
                   .exclude(Exists(AgentRun.objects.filter(chat=OuterRef("pk"))))
                   .exclude(Exists(AgentMessage.objects.filter(chat=OuterRef("pk")))))
    return Pruned(cutoff=cutoff, runs=run_count, steps=cascaded["steps"], messages=cascaded["messages"] + orphans,
                  chats=_in_batches(empty_chats, batch_size), memories=_in_batches(memories, batch_size),
                  plans=cascaded["plans"])
