"""Whom a spec should hand work to: the members it may ask, ranked by their records ("the registry decides").

The rule, as docs/registry.md states it ("Whom a spec asks"):

1. A member's record is its window for this person when that holds at least MIN_SAMPLE runs; else the
   organisation's last WINDOW_SIZE runs of it (every profile of that spec), when those are at least MIN_SAMPLE;
   else it is unproven.
2. Proven members come first, by score = success rate + INTENT_WEIGHT × the share of the record's runs that
   were for the asked intent; equal scores go improving, steady, getting worse (the summary's arrow), then in
   declaration order.
3. Unproven members follow, in declaration order; none is dropped.

It is asked inside a turn, so it costs at most two queries however many members there are: this person's
profiles, then the organisation's runs of the members that lack this person's sample.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.db import connection

from registry.models import WINDOW_SIZE, AgentProfile
from registry.stats import TREND_ARROWS, TREND_WORDS, ProfileStats, compute_stats, trend_direction

__all__ = ["INTENT_WEIGHT", "MIN_SAMPLE", "ORGANISATION", "PERSON", "RankedMember", "members_ranked"]

# Five runs before a record counts: with fewer, one run moves a success rate by 25 points or more (one of
# four), so two lucky runs would put a member ahead of one with a long good record. A higher bar would keep
# a person on the organisation's record longer, which speaks for everyone rather than for them.
MIN_SAMPLE = 5
# What having done this kind of work before is worth: a member whose every run was for the asked intent
# gains ten points of success rate. Enough to choose between members within ten points of each other, never
# enough to put one that fails more often than that ahead of one that succeeds.
INTENT_WEIGHT = Fraction(1, 10)

PERSON = "person"
ORGANISATION = "organisation"


@dataclass(frozen=True)
class RankedMember:
    """One candidate, where the rule put it and why, in words the asking spec's model reads."""

    spec_name: str
    record: str | None  # PERSON, ORGANISATION, or None: unproven
    stats: ProfileStats  # over the record's runs, oldest first (empty when unproven)
    intent_runs: int  # the record's runs that were for the asked intent
    score: float | None  # None when unproven
    annotation: str

    @property
    def proven(self) -> bool:
        return self.record is not None


def _entries(window: Any) -> list[dict[str, Any]]:
    """The window's entries; anything else a hand-edited row may hold is not a run and counts as none."""
    return [entry for entry in window if isinstance(entry, dict)] if isinstance(window, list) else []


def _own_windows(owner: Any, spec_names: list[str]) -> dict[str, list[dict[str, Any]]]:
    owner_id = getattr(owner, "pk", owner)
    if owner_id is None:  # nobody in particular (or a signed-out visitor): only the organisation speaks
        return {}
    rows = AgentProfile.objects.filter(owner_id=owner_id, spec_name__in=spec_names).values_list("spec_name", "window")
    return {spec_name: _entries(window) for spec_name, window in rows}


def _organisation_windows(spec_names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each spec's last WINDOW_SIZE runs across every profile of it, the organisation's own (owner empty)
    included, oldest first: the window an organisation-wide profile would hold. The registry files a run in
    its owner's profile only, so each run is counted once.

    One query. Only the WINDOW_SIZE most recently seen profiles of a spec are opened: a run from any other
    is older than the last run of each of those, so it cannot be among the newest WINDOW_SIZE. Timestamps
    compare as text: the registry writes them all as ISO 8601 in one time zone, which sorts as time does."""
    table = connection.ops.quote_name(AgentProfile._meta.db_table)
    window = connection.ops.quote_name(str(AgentProfile._meta.get_field("window").column))
    sql = f"""
        SELECT asked.spec_name, recent.entry
        FROM unnest(%s::text[]) AS asked(spec_name)
        CROSS JOIN LATERAL (
            SELECT entry.value::text AS entry
            FROM (
                SELECT profile.id, profile.{window} AS runs FROM {table} AS profile
                WHERE profile.spec_name = asked.spec_name AND profile.last_seen IS NOT NULL
                ORDER BY profile.last_seen DESC, profile.id DESC
                LIMIT %s
            ) AS seen
            CROSS JOIN LATERAL jsonb_array_elements(
                CASE jsonb_typeof(seen.runs) WHEN 'array' THEN seen.runs ELSE '[]'::jsonb END
            ) WITH ORDINALITY AS entry(value, position)
            WHERE jsonb_typeof(entry.value) = 'object'
            ORDER BY entry.value ->> 'timestamp' DESC NULLS LAST, seen.id DESC, entry.position DESC
            LIMIT %s
        ) AS recent
    """  # noqa: S608 -- only the model's own table and column names are formatted in; values are parameters
    newest_first: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, [spec_names, WINDOW_SIZE, WINDOW_SIZE])
        for spec_name, entry in cursor.fetchall():
            newest_first[spec_name].append(json.loads(entry))
    return {spec_name: entries[::-1] for spec_name, entries in newest_first.items()}


def _annotation(record: str | None, stats: ProfileStats, intent: str | None, intent_runs: int, runs: int) -> str:
    if record is None and not runs:
        return "no record yet"
    if record is None:
        return f"no record yet: {runs} run{'s' if runs != 1 else ''} so far, {MIN_SAMPLE} make one"
    direction = trend_direction(stats.trend)
    who = "for this person" if record == PERSON else "across the organisation"
    text = (
        f"{who}: {stats.success_rate:.0%} success rate over {stats.sample_size} recent runs, "
        f"{TREND_ARROWS[direction]} {abs(stats.trend):.0%} trend ({TREND_WORDS[direction]})"
    )
    if intent:
        text += f"; {intent_runs or 'none'} of them for {intent}"
    return text


def members_ranked(*, owner: Any, spec_names: Sequence[str], intent: str | None = None) -> list[RankedMember]:
    """The members `spec_names` (in declaration order; a name given twice counts once) ranked for `owner` (a
    user, a user id, or None for nobody in particular) by the rule above, best first, every one of them kept.
    `intent` is what the work is for, as runs record it (a tool's name, or "conversation")."""
    names = list(dict.fromkeys(spec_names))
    own = _own_windows(owner, names)
    lacking = [name for name in names if len(own.get(name, ())) < MIN_SAMPLE]
    organisation = _organisation_windows(lacking) if lacking else {}
    ranked: list[tuple[tuple[Any, ...], RankedMember]] = []
    for position, name in enumerate(names):
        if len(own.get(name, ())) >= MIN_SAMPLE:
            record, window = PERSON, own[name]
        elif len(organisation.get(name, ())) >= MIN_SAMPLE:
            record, window = ORGANISATION, organisation[name]
        else:
            record, window = None, []
        stats = compute_stats(window)
        intent_runs = sum(1 for entry in window if intent and entry.get("intent") == intent)
        key: tuple[Any, ...]
        if record is None:
            score, key = None, (1, position)
        else:
            successes = sum(1 for entry in window if entry.get("status") == "success")
            # Exact fractions, so that equal records tie exactly and the tie-breaks, not rounding, decide. The
            # trend only breaks ties: over a short window its halves are a few runs each, and it swings widely.
            exact = Fraction(successes, len(window)) + INTENT_WEIGHT * Fraction(intent_runs, len(window))
            score, key = float(exact), (0, -exact, -trend_direction(stats.trend), position)
        runs = max(len(own.get(name, ())), len(organisation.get(name, ())))
        ranked.append((key, RankedMember(name, record, stats, intent_runs, score,
                                         _annotation(record, stats, intent, intent_runs, runs))))
    return [member for _key, member in sorted(ranked, key=lambda pair: pair[0])]
