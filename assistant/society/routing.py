"""Routing without a call: a request that plainly belongs to one member is handed to it before the asking spec's
model is asked anything, and the step that hands it over says why.

A request is plain when its words name one tool (its intent, read as `plain_intent` reads it: one part, naming
what it acts on, fitting one tool better than any other), the asking spec cannot do that itself, and the members
that may do it for this person leave one with a clear lead:

1. only one member may do it; or
2. the registry's ranking for this person (registry/ranking.py: success rate, plus INTENT_WEIGHT for the share of
   runs for this intent) puts one ahead of every other by at least LEAD_MARGIN, each with a record (MIN_SAMPLE
   runs); or
3. one does it with less authority than every other (a narrower permission profile: a read goes to the member
   that only reads), and no record puts another ahead of it (none has one, or the ranking puts it first).

Anything else — a greeting, a question about the assistant, a request of several parts, one that points at "this"
or answers a question the assistant just asked, or members the records cannot tell apart — goes to the model,
which decides as it always did. A spec turns routing off with `routing: "never"` (its run's setting, which the
turn reads before asking here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assistant.llm.offline.intent import plain_intent
from assistant.society.members import Member, member
from assistant.society.offer import DelegationTool
from assistant.tools.offer import PROFILES, tools_for
from registry.ranking import INTENT_WEIGHT
from registry.selectors import RankedMember

#: How far ahead of every other member the records must put one (in points of score: success rate plus the
#: intent's weight) for the request to be plainly its own: as much as doing only this kind of work is worth.
LEAD_MARGIN = float(INTENT_WEIGHT)


@dataclass(frozen=True)
class Route:
    """Where a plain request goes: the delegation tool to call and, in words, why (the step keeps it)."""

    tool: DelegationTool
    intent: str
    reason: str


@dataclass(frozen=True)
class PlainIntent:
    """What a plain request asks for (a tool's name), and the members that may do it for this person."""

    name: str
    members: tuple[str, ...]


def plain_intent_of(*, owner: Any, asking: Member, request: str, members: Sequence[str]) -> PlainIntent | None:
    """The one intent `request` plainly has, when the spec `asking` cannot do it itself and some of `members`
    (those it may ask) may do it for `owner`; None when the request is not plain. Read before the members are
    ranked, so that they are ranked for it."""
    own = tools_for(owner, asking.name, asking.profile)
    can_do: dict[str, list[Any]] = {name: tools_for(owner, name) for name in members}
    # Read against every tool of the tree's next level and the asking spec's own: the one that fits best is
    # the intent, whoever has it.
    intent = plain_intent(request, [*own, *(each for tools in can_do.values() for each in tools)])
    if intent is None or any(tool.name == intent for tool in own):
        return None
    able = tuple(name for name, tools in can_do.items() if any(tool.name == intent for tool in tools))
    return PlainIntent(intent, able) if able else None


def plain_route(*, intent: PlainIntent, offered: Sequence[DelegationTool]) -> Route | None:
    """Where a request with the plain `intent` goes among the members `offered` (the run's delegation tools,
    ranked for that intent), or None when the model should decide."""
    able = [tool for tool in offered if tool.member in intent.members]
    if not able:
        return None
    name = intent.name
    if len(able) == 1:
        return Route(able[0], name, f"routed to {able[0].member}: intent {name}, the only member that may do it")
    order = [tool.ranked for tool in able if tool.ranked is not None]
    by_member = {tool.member: tool for tool in able}
    leader = _clear_leader(order) if len(order) == len(able) else None
    if leader is not None:
        return Route(by_member[leader.spec_name], name, f"routed to {leader.spec_name}: intent {name}, "
                     f"{leader.stats.success_rate:.0%} success over {leader.stats.sample_size} runs, "
                     f"{leader.intent_runs} of them for it")
    narrowest = _least_authority([member(each) for each in by_member])
    if narrowest is None or (any(each.proven for each in order) and order[0].spec_name != narrowest.name):
        return None  # records that put another ahead of it, or set none clearly apart: the model weighs them
    return Route(by_member[narrowest.name], name,
                 f"routed to {narrowest.name}: intent {name}, the member that may do it with the least authority "
                 f"({narrowest.profile.name})")


def _clear_leader(ranked: list[RankedMember]) -> RankedMember | None:
    """The member whose record leads every other's by LEAD_MARGIN, when every one of them has a record."""
    if not all(each.proven and each.score is not None for each in ranked):
        return None
    best, *rest = sorted(ranked, key=lambda each: -(each.score or 0.0))
    if all((best.score or 0.0) - (other.score or 0.0) >= LEAD_MARGIN for other in rest):
        return best
    return None


def _least_authority(members: list[Member]) -> Member | None:
    """The one member whose permission profile is narrower than every other's, or None (two as narrow)."""
    order = list(PROFILES)  # narrow to wide
    width = {each.name: order.index(each.profile.name) if each.profile.name in order else len(order)
             for each in members}
    narrowest = min(width.values())
    at_narrowest = [each for each in members if width[each.name] == narrowest]
    return at_narrowest[0] if len(at_narrowest) == 1 else None
