"""What a spec that only asks members can do for the person, said by the spec itself: who its members are
and what each one's role says it does.

Asked "what can you do?", such a spec answers at once, in one model call, from its `ask_<member>` tools: a
member is offered only when this person may ask it, and its tool's description carries its role. Asking
every member instead cost a run for each for a question about the assistant itself. Each line may end with
an example request, made from the role's own words (an action it names and a kind of record it names) and
shown only when, sent back to this spec, it is handed to that very member: as it is and with values in
place of its placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..types import ToolSpec
from .society import Seat, is_delegation, kinds_of, route, seat_of, singular, split_request
from .text import action_of, filled, stem

_NOTHING = "I'm the offline demo model and no tools or members are offered to you here, so I can only chat."
_INTRO = "Here is what I can do for you: I hand each request to the member whose role fits it; I change nothing myself."
_OUTRO = ("I'm the offline demo model: say what to do and to what, with names in quotes, one request at a time, "
          "or several joined with “then”.")
_PLACEHOLDERS = " Put your own values where an example has <angle brackets>."
_SIBILANT = ("sses", "shes", "ches", "xes", "zes")
_TOKEN = re.compile(r"[A-Za-z][\w-]*|[^\sA-Za-z]")
_JOINING = frozenset({",", "and", "or", "&"})
_ARTICLES = frozenset({"a", "an", "the", "my", "your", "their", "its"})


def introduce(tools: Sequence[ToolSpec]) -> str:
    """The reply to "what can you do?" of a spec whose tools only ask members: each member with its role,
    and an example request for it where one is sure to reach it."""
    seats = [seat_of(tool) for tool in tools if is_delegation(tool)]
    if not seats:
        return _NOTHING
    kinds = kinds_of(tools)
    lines = []
    for seat in seats:
        line = f"- **{seat.name}** — {_lowered(seat.role)}"
        example = next((said for said in _candidates(seat.role) if _reaches(said, seat, seats, kinds)), None)
        if example is not None:
            line += f" — e.g. “{example}”"
        lines.append(line)
    outro = _OUTRO + (_PLACEHOLDERS if any("<" in line for line in lines) else "")
    return "\n\n".join([_INTRO, "\n".join(lines), outro])


def _lowered(role: str) -> str:
    """"Finds and lists …" -> "finds and lists …", to follow the member's name; "CRM records …" stays."""
    return role[:1].lower() + role[1:] if role[1:2].islower() else role


def _base(verb: str) -> str:
    """The form of a verb a request starts with: "adds" -> "add", "finishes" -> "finish", "add" -> "add"."""
    if verb.endswith(_SIBILANT):
        return verb[:-2]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def _clauses(role: str) -> list[tuple[list[str], list[str]]]:
    """The role's actions with the records they act on, in its order: "Creates, renames and deletes projects
    (…)" -> [(["creates", "renames", "deletes"], ["projects"]), …]. Words joined by commas, "and" or "or" make
    a list; a list with an action word in it is a list of verbs, and the list right after it is their object."""
    lists: list[list[str]] = []
    joined = False
    for token in _TOKEN.findall(role):
        said = token.lower()
        if said in _JOINING:
            joined = True
        elif said in _ARTICLES:
            continue
        elif token[:1].isalpha() and lists and lists[-1] and joined:
            lists[-1].append(said)
            joined = False
        else:
            lists.append([said] if token[:1].isalpha() else [])
            joined = False
    return [(verbs, lists[at + 1]) for at, verbs in enumerate(lists[:-1])
            if any(action_of(stem(word)) for word in verbs)]


def _candidates(role: str) -> list[str]:
    """Requests the role's own words make: each action it names on each kind of record it names it on (a
    plural noun: "projects, tasks and comments"), in the role's order."""
    found: list[str] = []
    for verbs, objects in _clauses(role):
        records = [word for word in objects if action_of(stem(word)) is None and word.endswith("s")
                   and not word.endswith("ss")]
        for word in verbs:
            action = action_of(stem(word))
            if action is None:
                continue
            # "Adds …" says a verb a request can start with; "… done and lists" says none, so the action's own.
            verb = _base(word) if word.endswith("s") and not word.endswith("ss") else action
            for kinds in records:
                record = singular(kinds)
                if action == "list":
                    found.append(f"list my {kinds}")
                elif action == "create":
                    found.append(f"{verb} {'an' if record[:1] in 'aeiou' else 'a'} {record} '<name>'")
                elif action == "update" and verb == "rename":
                    found.append(f"rename the {record} '<name>' to '<new name>'")
                elif action == "complete":
                    found.append(f"mark the {record} '<name>' done" if verb == "mark"
                                 else f"{verb} the {record} '<name>'")
                elif action == "delete":
                    found.append(f"{verb} the {record} '<name>'")
    return list(dict.fromkeys(found))


def _reaches(example: str, seat: Seat, seats: list[Seat], kinds: frozenset[str]) -> bool:
    """Whether `example`, sent to this spec as it is and with values in its placeholders, is handed (as one
    task) to `seat` and no other member."""
    for sent in (example, filled(example)):
        tasks = split_request(sent, kinds)
        routed, unfit = route(tasks, seats)
        if len(tasks) != 1 or unfit or routed[0][1].name != seat.name:
            return False
    return True
