"""The offline demo model as a spec that may hand work to members (its `ask_<member>` tools).

A request of several parts ("create a project Garden with the tasks 'water the plants' and 'buy seeds',
then tell me my open tasks"), or one its own tools cannot do, is split into short tasks, each of one action
("Create the project 'Garden'.", "Add the task 'water the plants' to the project 'Garden'.", "List my open
tasks."), and each task goes to the member whose role fits it best. The members are asked in order, one
answer at a time; tasks in a row for the same member and action (the two tasks above) are asked at once.
When a member cannot go on, the model stops there and tells the person what was done and what was not.
Like the rest of the demo model it keeps no state: each call works the plan out again from the messages.

Requests it splits: parts joined by "then", "and then", "after that" or ";"; "a project P with the tasks
'a' and 'b'" (a project, then a task each, for any two kinds of record the members' roles name); "tell me",
"show me", "give me" and "what are" ask for a list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from ..types import ToolCall, ToolSpec
from .text import Request, action_of, quoted_parts, read_request, stem, stems, words

#: How the product names a delegation tool (assistant/society/offer.py): `ask_<member>`; and its planning tool
#: (assistant/plans/offer.py), which a request of several tasks is planned with first, in the open.
_ASK = "ask_"
PLAN_TOOL = "assistant_plan"
#: The delegation argument that keeps a member's answer for the asking model instead of handing the reply over.
_RETURN_ANSWER = "return_answer"
_ROLE = re.compile(r"“[^”]*”: (?P<role>.*?)\. It works with its own tools", re.DOTALL)
_PARTS = re.compile(r"\s*(?:[,;]\s*(?:and\s+)?then\b|[,;]?\s+and\s+then\b|\bthen\b|[,;]?\s*after that\b|;)\s*",
                    re.IGNORECASE)
_LIST_ASKED = re.compile(r"^(?:please\s+)?(?:tell me|show me|give me|what are)\s+", re.IGNORECASE)
# "create a project Garden with the tasks 'a' and 'b'": a record, and records of another kind in it. Which
# words are kinds of record is the tools' and members' to say (`kinds_of`), so any app's nouns work.
_WITH_PARTS = re.compile(
    r"^(?:please\s+)?(?:create|make|add|start|set up)\s+(?:a\s+|an\s+|the\s+)?(?:new\s+)?(?P<kind>[a-z][\w-]*)\s+"
    r"(?P<name>'[^']+'|\"[^\"]+\"|“[^”]+”|[\w-]+)\s+with\s+(?:the\s+)?(?P<parts>[a-z][\w-]*)\s+(?P<items>.+)$",
    re.IGNORECASE,
)
_QUOTED_LIST = re.compile(r"""(?:\s*(?:,|\band\b)?\s*(?:'[^']+'|"[^"]+"|“[^”]+”|‘[^’]+’))+\s*""")
#: Below this a member's role does not fit a task at all.
MIN_FIT = 3


@dataclass(frozen=True)
class Seat:
    """A member the model may ask: its tool, its role in the tool's words, and what that role says it does."""

    tool: ToolSpec
    name: str
    role: str
    stems: frozenset[str]
    actions: frozenset[str]


def _parameters(tool: ToolSpec) -> Mapping[str, Any]:
    properties = tool.parameters.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def is_delegation(tool: ToolSpec) -> bool:
    return tool.name.startswith(_ASK) and "task" in _parameters(tool)


def seat_of(tool: ToolSpec) -> Seat:
    found = _ROLE.search(tool.description)
    role = found.group("role") if found else tool.description
    role_stems = frozenset(stems(role))
    return Seat(tool, tool.name[len(_ASK):], role.strip().rstrip("."), role_stems,
                frozenset(action for word in role_stems if (action := action_of(word)) is not None))


def kinds_of(tools: Sequence[ToolSpec]) -> frozenset[str]:
    """The kinds of record the members' roles name ("Adds, updates, … tasks" -> task), stemmed."""
    return frozenset(word for tool in tools if is_delegation(tool) for word in seat_of(tool).stems
                     if action_of(word) is None)


def singular(word: str) -> str:
    """"tasks" -> "task", "categories" -> "category": how a list of records names one of them."""
    if word.lower().endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if word.lower().endswith("s") and not word.lower().endswith("ss") else word


def split_request(text: str, kinds: frozenset[str] = frozenset()) -> list[str]:
    """The request as tasks of one action each, in the order asked. `kinds` are the stemmed kinds of record
    the tools or members name: "a <kind> P with the <other kind>s 'a' and 'b'" is P, then each of those."""
    tasks: list[str] = []
    for part in (piece.strip(" ,.;") for piece in _PARTS.split(text)):
        if not part:
            continue
        part = _LIST_ASKED.sub("list ", part)
        with_parts = _WITH_PARTS.match(part)
        if with_parts and _QUOTED_LIST.fullmatch(with_parts.group("items")):
            kind, inner = with_parts.group("kind").lower(), singular(with_parts.group("parts").lower())
            if stem(kind) in kinds and stem(inner) in kinds and stem(kind) != stem(inner):
                name = with_parts.group("name").strip("'\"“”")
                tasks.append(f"Create the {kind} '{name}'.")
                tasks.extend(f"Add the {inner} '{title}' to the {kind} '{name}'."
                             for title in quoted_parts(with_parts.group("items")))
                continue
        tasks.append(part[:1].upper() + part[1:] + ("" if part.endswith((".", "?", "!")) else "."))
    return tasks


def _fit(seat: Seat, request: Request) -> int:
    """How well the member's role fits the task: the thing it acts on, the action, other shared words."""
    # A placeholder ("the task '<title>'", an example sent back as it is) says what is acted on as a name does.
    named = sorted((*request.names, *request.placeholders), key=lambda name: name.start)
    acted_on = next((name.noun for name in named if name.noun), None)
    score = 4 if acted_on is not None and acted_on in seat.stems else 0
    score += 3 if request.actions & seat.actions else 0
    # A request that starts with a verb of the role's own ("attach this to …", "archive …"): what it does.
    said = words(request.text)
    lead = stem(said[0]) if said else ""
    score += 3 if lead and action_of(lead) is None and lead in seat.stems else 0
    # The kinds of the other records named ("to the project 'Home'") say where, not who should act.
    return score + 2 * len((request.stems & seat.stems) - {name.noun for name in named})


def route(tasks: list[str], seats: list[Seat]) -> tuple[list[tuple[str, Seat]], list[str]]:
    """Each task with the member it goes to (the best fit; the registry's order breaks ties), and the
    tasks no member fits."""
    routed, unfit = [], []
    today = timezone.localdate()
    for task in tasks:
        request = read_request(task, today=today)
        best = max(seats, key=lambda seat: _fit(seat, request))  # max keeps the first of equals
        if _fit(best, request) < MIN_FIT:
            unfit.append(task)
        else:
            routed.append((task, best))
    return routed, unfit


def _batches(routed: list[tuple[str, Seat]]) -> list[list[tuple[str, Seat]]]:
    """Tasks in a row for the same member and action are asked in one answer (their budgets are shared)."""
    today = timezone.localdate()
    batches: list[list[tuple[str, Seat]]] = []
    previous: tuple[str, frozenset[str]] | None = None
    for task, seat in routed:
        key = (seat.name, read_request(task, today=today).actions)
        if batches and key == previous:
            batches[-1].append((task, seat))
        else:
            batches.append([(task, seat)])
        previous = key
    return batches


def answer_of(content: str) -> dict[str, Any]:
    try:
        value = json.loads(content)
    except ValueError:
        return {"status": "answered", "answer": content}
    return value if isinstance(value, dict) else {"status": "answered", "answer": str(value)}


def delegate(text: str, made: Sequence[ToolCall], results: Mapping[str | None, str], tools: Sequence[ToolSpec],
             next_id: int) -> tuple[str, list[ToolCall]] | None:
    """The next step of handing `text` round the members: calls to make, a wait ("", []), or the reply.
    None when the request is one task no member fits (the model then tries its own tools)."""
    seats = [seat_of(tool) for tool in tools if is_delegation(tool)]
    if not seats:
        return None
    tasks = split_request(text, kinds_of(tools))
    routed, unfit = route(tasks, seats)
    if unfit:
        if len(tasks) == 1:
            return None
        names = ", ".join(seat.name for seat in seats)
        return (f"None of the members I can ask ({names}) can do this part: “{unfit[0]}”. "
                "I did nothing; ask for it another way, or on its own."), []
    plans = [call for call in made if call.name == PLAN_TOOL]
    may_plan = any(tool.name == PLAN_TOOL for tool in tools) and len(routed) > 1
    if may_plan and not plans:
        steps = [{"do": task, "tool": seat.tool.name} for task, seat in routed]
        return "", [ToolCall(f"call_offline_{next_id}", PLAN_TOOL, {"steps": steps})]
    if plans and plans[-1].id not in results:
        return "", []
    heard: list[tuple[str, Seat, dict[str, Any]]] = []
    for batch in _batches(routed):
        calls: list[ToolCall] = []
        waiting = False
        for task, seat in batch:
            previous = next((call for call in made if call.name == seat.tool.name
                             and call.arguments.get("task") == task), None)
            if previous is None:
                # A request of several parts is answered from all of them: each member's answer comes back here,
                # where the tool lets it (a member asked alone for the whole request answers the person itself).
                back = {_RETURN_ANSWER: True} if len(routed) > 1 and _RETURN_ANSWER in _parameters(seat.tool) else {}
                calls.append(ToolCall(f"call_offline_{next_id + len(calls)}", seat.tool.name, {"task": task, **back}))
            elif previous.id not in results:
                waiting = True
            else:
                heard.append((task, seat, answer_of(results[previous.id])))
        if calls:
            return "", calls
        if waiting:
            return "", []
        failed = next((answer for answer in heard if answer[2].get("status") != "answered"), None)
        if failed is not None:
            if may_plan and len(plans) == 1:
                # Re-planned in the open: what is left depended on the part that failed, so nothing is left.
                task, seat, answer = failed
                reason = f"{seat.name} could not do “{task}”; the rest depended on it, so it is not tried."
                return "", [ToolCall(f"call_offline_{next_id}", PLAN_TOOL, {"steps": [], "reason": reason})]
            return _reply(heard, stopped=failed), []
    return _reply(heard), []


def _reply(heard: list[tuple[str, Seat, dict[str, Any]]],
           stopped: tuple[str, Seat, dict[str, Any]] | None = None) -> str:
    lines = []
    for task, seat, answer in heard:
        if stopped is not None and answer is stopped[2]:
            continue
        said = str(answer.get("answer") or answer.get("reason") or "").strip()
        lines.append(f"**{seat.name}** — {task}\n\n{said}")
    if stopped is not None:
        task, seat, answer = stopped
        if any(problem.get("status") == "declined" for problem in answer.get("problems") or ()):
            # What the member's model was told of the refusal is an instruction to it, not news for the person.
            lines.append(f"I stopped there: {seat.name} asked you before “{task}”. You declined it, so nothing was "
                         "changed. Nothing after it was tried.")
        else:
            reason = str(answer.get("reason") or "it could not go on")
            lines.append(f"I stopped there: {seat.name} could not do “{task}” ({reason}). Nothing after it was "
                         "tried.")
    return "\n\n".join(lines)
