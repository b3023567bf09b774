"""What a spec that only asks members can do for the person: each member's own tools, told by the member.

Asked "what can you do?", such a spec has no tools to list; its members have, and only they know which of
them this person may use. So it asks every member it may ask, in one answer (the members run side by side),
the question a member answers with its tools in words and an example request for each (capabilities.py).
From their answers it writes one list, grouped by the kind of record as each member grouped it. A line
two members share is shown once. An example is shown only when, sent back to this spec as it is, it is
handed to a member that gave that very example itself: so each one reaches a member whose tools do it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..types import ToolCall, ToolSpec
from .capabilities import Offer, read_capabilities
from .society import Seat, answer_of, is_delegation, kinds_of, route, seat_of, split_request

#: What each member is asked: a question its model (the offline one included) answers with what it can do.
CAPABILITY_TASK = "What can you do for me?"
_NOTHING = "I'm the offline demo model and no tools or members are offered to you here, so I can only chat."


def ask_members(made: Sequence[ToolCall], results: Mapping[str | None, str], tools: Sequence[ToolSpec],
                next_id: int) -> tuple[str, list[ToolCall]]:
    """The next step of "what can you do?" for a spec that only asks members: the question to each of them
    (all at once), a wait ("", []), or the reply composed from their answers."""
    seats = [seat_of(tool) for tool in tools if is_delegation(tool)]
    if not seats:
        return _NOTHING, []
    calls: list[ToolCall] = []
    waiting = False
    heard: list[tuple[Seat, dict[str, Any]]] = []
    for seat in seats:
        asked = next((call for call in made if call.name == seat.tool.name
                      and call.arguments.get("task") == CAPABILITY_TASK), None)
        if asked is None:
            calls.append(ToolCall(f"call_offline_{next_id + len(calls)}", seat.tool.name, {"task": CAPABILITY_TASK}))
        elif asked.id not in results:
            waiting = True
        else:
            heard.append((seat, answer_of(results[asked.id])))
    if calls:
        return "", calls
    if waiting:
        return "", []
    return compose(heard, seats), []


def _reaches(example: str, seats: list[Seat], offered: dict[str, list[Offer]]) -> bool:
    """Whether `example`, sent to this spec, goes (as one task) to a member that gave it as an example."""
    tasks = split_request(example, kinds_of([seat.tool for seat in seats]))
    if len(tasks) != 1:
        return False
    routed, _ = route(tasks, seats)
    return bool(routed) and any(offer.example == example for offer in offered.get(routed[0][1].name, ()))


def compose(heard: list[tuple[Seat, dict[str, Any]]], seats: list[Seat]) -> str:
    """One reply from the members' answers: their lines grouped by heading, each once, with the examples
    that reach a member able to do them."""
    offered: dict[str, list[Offer]] = {}
    unread: list[tuple[Seat, str]] = []  # an answer that is no list of capabilities: shown as it is
    silent: list[tuple[Seat, str]] = []  # a member that could not answer, and why
    for seat, answer in heard:
        said = str(answer.get("answer") or "").strip()
        if answer.get("status") != "answered":
            silent.append((seat, str(answer.get("reason") or "it could not answer")))
            continue
        offers = read_capabilities(said)
        if offers:
            offered[seat.name] = offers
        elif said:
            unread.append((seat, said))
    groups: dict[str, dict[str, str | None]] = {}  # heading -> purpose -> example
    for offers in offered.values():
        for offer in offers:
            lines = groups.setdefault(offer.heading, {})
            fits = offer.example is not None and _reaches(offer.example, seats, offered)
            if lines.get(offer.purpose) is None:
                lines[offer.purpose] = offer.example if fits else None
    blocks = [f"**{heading}**\n" + "\n".join(
        f"- {said}" + (f" — e.g. “{example}”" if example else "") for said, example in lines.items())
        for heading, lines in groups.items()]
    blocks += [f"**{seat.name}**\n{said}" for seat, said in unread]
    blocks += [f"I could not hear from {seat.name}: {why}" for seat, why in silent]
    if not blocks:
        return _NOTHING
    names = [seat.name for seat in seats]
    who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    intro = f"Here is what I can do for you. I hand each request to the member whose role fits it ({who}):"
    outro = ("I'm the offline demo model: say what to do and to what, with names in quotes, one request at a "
             "time, or several joined with “then”.") + (
        " Put your own values where an example has <angle brackets>." if any("<" in block for block in blocks) else "")
    return "\n\n".join([intro, *blocks, outro])
