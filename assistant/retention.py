"""Retention: the assistant's evidence leaves by age, through `manage.py assistant_prune`, never the admin.

Runs created before the cut-off go with their steps and messages; chats that have nothing left go too;
memories created before the cut-off go. A run still active (queued, running, waiting for its person)
stays, with everything of it, however old it is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentRun, AgentStep

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

    def counts(self) -> list[tuple[int, str, str]]:
        return [(self.runs, "run", "runs"), (self.steps, "step", "steps"), (self.messages, "message", "messages"),
                (self.chats, "chat", "chats"), (self.memories, "memory", "memories")]


def _doomed(cutoff: datetime) -> tuple[QuerySet[AgentRun], QuerySet[AgentStep], QuerySet[AgentMessage],
                                       QuerySet[AgentChat], QuerySet[AgentMemory]]:
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


@transaction.atomic
def evidence_prune(*, older_than: timedelta, dry_run: bool, now: datetime | None = None) -> Pruned:
    """Delete (or, with `dry_run`, only count) the evidence created more than `older_than` ago."""
    cutoff = (now or timezone.now()) - older_than
    runs, steps, messages, chats, memories = _doomed(cutoff)
    # Ids first, so that what is counted is exactly what is deleted, whatever the order of the deletes.
    run_ids = list(runs.values_list("pk", flat=True))
    chat_ids = list(chats.values_list("pk", flat=True))
    message_ids = list(messages.values_list("pk", flat=True))
    pruned = Pruned(cutoff=cutoff, runs=len(run_ids), steps=steps.count(), messages=len(message_ids),
                    chats=len(chat_ids), memories=memories.count())
    if dry_run:
        return pruned
    AgentStep.objects.filter(run_id__in=run_ids).delete()
    AgentMessage.objects.filter(pk__in=message_ids).delete()
    AgentRun.objects.filter(pk__in=run_ids).delete()
    AgentChat.objects.filter(pk__in=chat_ids).delete()
    memories.delete()
    return pruned
