"""Allowances: what a person may spend on the assistant's models in a day and in a month (AgentAllowance, set by
staff in the admin), in tokens and in money (by the PRICES setting, assistant/llm/prices.py).

A run is given no more than is left. When a person's message opens a run, what they have spent in each period
is read — every ended run's own tokens and cost, plus what each of their runs still at work holds — and the
run's token limit becomes at most what is left of the tightest of their limits (money turned into tokens at the
dearest price of the run's model chain). The run holds that much until it ends, and its loop never passes its
limit (assistant/turn/limits.py), nor do the members it asks, which share it (assistant/society/budget.py): so
however many messages a person sends at once, what their runs can spend together stays within the allowance.
The reading and the run's row are made under a lock of the person's, taken in the send's transaction: two
sends of theirs read one after the other, each seeing the other's hold.

What is left that would not pay for one answer of the model (MAX_OUTPUT_TOKENS) refuses the message, saying which
allowance was used and when it resets. A run that reaches what is left stops at its next model call, saying so;
and before each of its model calls, a run whose tree holds an allowance reads it again (`allowance_now`), so
one staff lowered meanwhile stops it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, DecimalField, Q, Sum
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import formats, timezone

from assistant.conf import assistant_settings
from assistant.llm.prices import COST_PLACES, most_per_token
from assistant.models import AgentAllowance, AgentRun
from assistant.society.budget import tree_usage

PERIODS = ("day", "month")
_WORDS = {"day": "daily", "month": "monthly"}
#: The run's config key its hold is kept under.
ALLOWANCE = "allowance"
#: A member's config key saying its tree's top run holds an allowance (which the member reads again too).
ALLOWANCE_TREE = "allowance_tree"
# The first key of the person's lock (the second is their id): any number no other lock of the site uses.
_LOCK_SPACE = 0x41_4C_57


class AllowanceSpent(Exception):
    """Nothing (or too little for one answer) is left of one of the person's allowances: `message` says which,
    and when it resets (`resets_at`)."""

    def __init__(self, message: str, resets_at: datetime) -> None:
        super().__init__(message)
        self.message, self.resets_at = message, resets_at


@dataclass(frozen=True)
class Limit:
    period: str  # day | month
    kind: str  # tokens | cost
    amount: int | Decimal


def limits_of(user: Any) -> list[Limit]:
    """The person's limits: their own allowance's, else the most generous of their groups' (a group that sets no
    limit of a kind gives them none of that kind). One query."""
    rows = list(AgentAllowance.objects.filter(Q(user=user) | Q(group__user=user)).distinct())
    own = [row for row in rows if row.user_id is not None]
    chosen = own or rows
    limits = []
    for period in PERIODS:
        for kind in ("tokens", "cost"):
            amounts = [getattr(row, f"{kind}_per_{period}") for row in chosen]
            if amounts and all(amount is not None for amount in amounts):
                limits.append(Limit(period, kind, max(amounts)))
    return limits


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """Where `period` started and when it resets, in the site's time zone."""
    local = timezone.localtime(now)
    if period == "day":
        start = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + timedelta(days=32)).replace(day=1)
    return start, following


@dataclass(frozen=True)
class Spent:
    tokens: int
    cost: Decimal


def _spent_sums(starts: dict[str, datetime]) -> dict[str, Any]:
    """The sums of each period since its start: ended runs' own tokens and cost, and what runs at work hold (a
    member's by its top run's hold, never twice)."""
    allowance = KeyTransform(ALLOWANCE, "config")
    held_tokens = Coalesce(Cast(KeyTextTransform("tokens", allowance), BigIntegerField()),
                           Cast(KeyTextTransform("max_tokens_per_run", "config"), BigIntegerField()))
    held_cost = Cast(KeyTextTransform("cost", allowance), DecimalField(max_digits=14, decimal_places=6))
    at_work = Q(parent__isnull=True, status__in=AgentRun.ACTIVE_STATUSES)
    ended = Q(status__in=AgentRun.ENDED_STATUSES) & (Q(root__isnull=True) | Q(root__status__in=AgentRun.ENDED_STATUSES))
    sums: dict[str, Any] = {}
    for period, start in starts.items():
        since = Q(created_at__gte=start)
        sums.update({
            f"{period}_tokens": Sum("total_tokens", filter=ended & since),
            f"{period}_cost": Sum("cost", filter=ended & since),
            f"{period}_held_tokens": Sum(held_tokens, filter=at_work & since),
            f"{period}_held_cost": Sum(held_cost, filter=at_work & since),
        })
    return sums


def _spent(found: dict[str, Any], starts: dict[str, datetime]) -> dict[str, Spent]:
    return {period: Spent(tokens=int(found[f"{period}_tokens"] or 0) + int(found[f"{period}_held_tokens"] or 0),
                          cost=Decimal(found[f"{period}_cost"] or 0) + Decimal(found[f"{period}_held_cost"] or 0))
            for period in starts}


def spent_since(user: Any, starts: dict[str, datetime]) -> dict[str, Spent]:
    """What the person spent in each period since its start. One statement, so a run that ends meanwhile is
    counted once, one way or the other."""
    found = AgentRun.objects.filter(owner=user, created_at__gte=min(starts.values())).aggregate(**_spent_sums(starts))
    return _spent(found, starts)


def spent_by_people(user_ids: Iterable[Any], starts: dict[str, datetime]) -> dict[Any, dict[str, Spent]]:
    """`spent_since` for each of `user_ids` in one statement (a page of the allowances' list): each of them is in
    the answer, those who spent nothing with zeros."""
    ids = set(user_ids)
    if not ids:
        return {}
    rows = (AgentRun.objects.filter(owner_id__in=ids, created_at__gte=min(starts.values())).order_by()
            .values("owner_id").annotate(**_spent_sums(starts)))
    spent = {row["owner_id"]: _spent(dict(row), starts) for row in rows}
    nothing = {period: Spent(tokens=0, cost=Decimal(0)) for period in starts}
    return {user_id: spent.get(user_id, nothing) for user_id in ids}


def _amount(limit: Limit, value: int | Decimal) -> str:
    if limit.kind == "tokens":
        return f"{formats.number_format(int(value), force_grouping=True)} tokens"
    return f"{Decimal(value).quantize(Decimal('0.01'))} {assistant_settings.CURRENCY}"


def _resets_in_words(resets_at: datetime, now: datetime) -> str:
    local = timezone.localtime(resets_at)
    hours = max(int((resets_at - now).total_seconds() // 3600), 0)
    when = "midnight" if local.hour == 0 and local.minute == 0 else local.strftime("%H:%M")
    if local.day == 1 and (resets_at - now) > timedelta(days=1):
        return f"It resets on {local.day} {local.strftime('%B')}."
    return f"It resets at {when} ({'in under an hour' if hours < 1 else f'in {hours} h'})."


def _lock(user: Any) -> None:
    """The person's allowance lock, held to the end of the send's transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_SPACE, int(user.pk) % 2_147_483_647])


@dataclass(frozen=True)
class Left:
    """What is left of one of the person's limits, in its own unit (tokens, or money), and when it resets."""

    limit: Limit
    amount: int | Decimal
    resets_at: datetime

    def in_tokens(self, per_token: Decimal | None) -> int | None:
        """As tokens, money at `per_token`; None for money when the model has no price (it spends none)."""
        if self.limit.kind == "tokens":
            return int(self.amount)
        if not per_token:
            return None
        return int(max(Decimal(self.amount), Decimal(0)) / per_token)


def _left_now(owner: Any, now: datetime, *, limits: list[Limit] | None = None,
              not_counting: AgentRun | None = None) -> list[Left]:
    """What is left of each of the person's limits (`limits`, read when not given) now, as a send reads it (two
    queries; none left when they have no allowance); `not_counting`: a run at work whose own hold is not counted
    against it."""
    limits = limits_of(owner) if limits is None else limits
    if not limits:
        return []
    bounds = {period: period_bounds(period, now) for period in {limit.period for limit in limits}}
    spent = spent_since(owner, {period: start for period, (start, _) in bounds.items()})
    hold = (not_counting.config or {}).get(ALLOWANCE) if not_counting is not None else None
    held_tokens, held_cost = ((int(hold.get("tokens") or 0), Decimal(str(hold.get("cost") or 0)))
                              if isinstance(hold, dict) else (0, Decimal(0)))
    found = []
    for limit in limits:
        start, resets_at = bounds[limit.period]
        used = spent[limit.period]
        # A run begun in this period is in its sums by its hold.
        held = not_counting is not None and not_counting.created_at >= start
        if limit.kind == "tokens":
            amount: int | Decimal = int(limit.amount) - (used.tokens - (held_tokens if held else 0))
        else:
            amount = Decimal(limit.amount) - (used.cost - (held_cost if held else Decimal(0)))
        found.append(Left(limit, amount, resets_at))
    return found


def _tightest(left: list[Left], per_token: Decimal | None) -> tuple[int, Left] | None:
    """The limit that leaves the fewest tokens, and how many; None when none counts for this model."""
    counted = [(tokens, each) for each in left if (tokens := each.in_tokens(per_token)) is not None]
    return min(counted, key=lambda pair: pair[0]) if counted else None


def allowance_hold(user: Any, config: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any] | None:
    """Fit a run about to open for `user` (its `config`, changed in place) within their allowances: its token
    limit at most what is left, and the hold kept in its config. None when no allowance applies; raises
    AllowanceSpent when too little is left. Call it in the transaction that writes the run."""
    limits = limits_of(user)
    if not limits:
        return None
    _lock(user)
    now = now or timezone.now()
    per_token = most_per_token(str(config.get("model") or assistant_settings.MODEL), config.get("prices"))
    tightest = _tightest(_left_now(user, now, limits=limits), per_token)
    if tightest is None:
        return None  # a model with no price spends nothing counted in money
    left, binding = tightest
    if left < int(assistant_settings.MAX_OUTPUT_TOKENS):
        limit = binding.limit
        allowance = f"your {_WORDS[limit.period]} allowance of {_amount(limit, limit.amount)} for the assistant"
        said = (f"You have used {allowance}." if left <= 0 else
                f"What is left of {allowance} is too little for another answer.")
        raise AllowanceSpent(f"{said} {_resets_in_words(binding.resets_at, now)}", binding.resets_at)
    tokens = min(int(config["max_tokens_per_run"]), left)
    config["max_tokens_per_run"] = tokens
    hold = {"tokens": tokens, "cost": str((tokens * per_token).quantize(COST_PLACES)) if per_token else None,
            "period": binding.limit.period, "kind": binding.limit.kind, "limit": str(binding.limit.amount),
            "resets_at": binding.resets_at.isoformat(), "binds": tokens == left}
    config[ALLOWANCE] = hold
    return hold


def allowance_now(run: AgentRun, used: int) -> tuple[int, str] | None:
    """For a run of a tree whose top run holds an allowance, which with the members it asked has used `used`
    tokens: the most it may use by the person's allowances as they are now — staff may have lowered one since
    the tree began — and what it says when it stops for that; None when its tree holds none, or what applies now
    still leaves the tree its whole hold. What the person's other runs used, or hold, is counted as a send counts
    it; the tree's own hold is not counted against it. Two queries for a top run; for a member, two more (its
    top run, and what the rest of the tree used)."""
    if run.parent_id is None:
        return _top_allowance_now(run)
    if not (run.config or {}).get(ALLOWANCE_TREE):
        return None
    top = AgentRun.objects.get(pk=run.root_id or run.parent_id)
    found = _top_allowance_now(top)
    if found is None:
        return None
    most, words = found
    return most - (tree_usage(top).tokens - used), words


def _top_allowance_now(run: AgentRun) -> tuple[int, str] | None:
    hold = (run.config or {}).get(ALLOWANCE)
    if not isinstance(hold, dict):
        return None
    per_token = most_per_token(str((run.config or {}).get("model") or run.model), (run.config or {}).get("prices"))
    # Its allowance removed: the run keeps within what it was given.
    tightest = _tightest(_left_now(run.owner_id, timezone.now(), not_counting=run), per_token)
    if tightest is None or tightest[0] >= int(hold.get("tokens") or 0):
        return None
    left, binding = tightest
    return max(left, 0), _stop_words(binding.limit, binding.resets_at)


#: Under this share of an allowance left, a reply tells its person how much is left.
LOW_SHARE = Decimal("0.25")


def allowance_note(run: AgentRun) -> str | None:
    """For a run that held part of its person's allowance, once it has ended: when less than a quarter of one of
    their allowances is left, how much, in words ("3,000 tokens are left of your daily allowance of 20,000
    tokens. It resets at midnight (in 5 h)."); None otherwise (and, for a run that held none, no query)."""
    if not isinstance((run.config or {}).get(ALLOWANCE), dict):
        return None
    return person_allowance_note(run.owner_id)


def person_allowance_note(owner: Any) -> str | None:
    """The same words for a person whatever they last asked, as the panel shows them again when it loads (one
    query for anyone without an allowance); None when no allowance of theirs is that low."""
    now = timezone.now()

    def share(left: Left) -> Decimal:
        return Decimal(left.amount) / Decimal(left.limit.amount) if left.limit.amount else Decimal(0)

    low = [left for left in _left_now(owner, now) if share(left) < LOW_SHARE]
    if not low:
        return None
    lowest = min(low, key=share)
    limit, amount = lowest.limit, max(lowest.amount, 0)
    verb = "are" if limit.kind == "tokens" else "is"
    return (f"{_amount(limit, amount)} {verb} left of your {_WORDS[limit.period]} allowance of "
            f"{_amount(limit, limit.amount)}. {_resets_in_words(lowest.resets_at, now)}")


def _stop_words(limit: Limit, resets_at: datetime) -> str:
    return (f"The assistant stopped: another model call would pass what is left of your {_WORDS[limit.period]} "
            f"allowance of {_amount(limit, limit.amount)}. {_resets_in_words(resets_at, timezone.now())}")


def allowance_stop_words(config: dict[str, Any]) -> str | None:
    """What a run stopped at its token limit says when that limit was what was left of an allowance; None."""
    hold = (config or {}).get(ALLOWANCE)
    if not isinstance(hold, dict) or not hold.get("binds"):
        return None
    try:
        resets_at = datetime.fromisoformat(str(hold["resets_at"]))
        limit = Limit(str(hold["period"]), str(hold["kind"]), Decimal(str(hold["limit"])))
    except (KeyError, ValueError, ArithmeticError):
        return None
    return _stop_words(limit, resets_at)
