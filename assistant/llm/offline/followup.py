"""A reply that only gives what the model asked for ("5", "Home", "the one called Home"), joined to the
request it was asked for.

The model keeps no state, so it recognises its own questions in the conversation: "Which book (its id)?
I need it to …" and "What title (in quotes)? …" (replies.missing_reply), and "More than one project
matches “Home”: … Which one? You can give its number …" (the planner's lookup). When the person's latest
message follows one of them and is just a value, the request it answers is the earlier one with that value
written into it the way the model reads it ("rename the book to 'Emma'" + "5" -> "… book 5"). The earlier
request may itself have been such an answer, so a second question is joined to the first the same way.
A spec that relays its members' answers (society.py: "**clerk** — <task>\n\n<its answer>") has the
member's question in one block, and the answer then completes that member's task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..types import Message
from .page import is_page_message
from .text import ACTIONS, quoted_parts, stem, words

_QUESTION = re.compile(r"^(?P<asks>(?:Which|What) [^?\n]+)\? I need (?:it|them) to ")
_ASK = re.compile(r"^which (?P<noun>[\w-]+) \(its id(?: or its exact name)?\)$"
                  r"|^what (?P<label>.+?)(?P<quoted> \(in quotes\))?$")
_SEVERAL = re.compile(r"^More than one (?P<noun>[\w-]+) matches “(?P<name>[^”]+)”: .*?Which one\? ", re.DOTALL)
_RELAYED = re.compile(r"^\*\*(?P<member>[\w-]+)\*\* — (?P<task>[^\n]+)\n\n(?P<said>.+)$", re.DOTALL)
# What may come before the value itself: "it's", "the one called", "the book", "number", "#".
_LEAD = re.compile(
    r"^(?:(?:it(?:'s|’s| is)|that(?:'s|’s| is)|i mean|oh|sorry|yes|ok(?:ay)?)[\s,]+)*(?:the\s+)?(?:one\s+)?"
    r"(?:(?:called|named|titled)\s+)?", re.IGNORECASE)
_NUMBER = re.compile(r"^(?:(?:id|number|no\.?)\s*|#)?(?P<n>\d+)$", re.IGNORECASE)
# Words that answer a question without giving what it asked for.
_NO_VALUE = frozenset({"no", "nope", "yes", "ok", "okay", "cancel", "stop", "never mind", "nevermind", "forget it",
                       "thanks", "thank you", "nothing", "none", "help"})
_VERBS = frozenset(stem(verb) for verbs in ACTIONS.values() for verb in verbs)
#: How many questions in a row an answer is joined through.
MAX_CHAIN = 4
#: A value longer than this is a request of its own, not an answer.
MAX_VALUE_WORDS = 6

Better = Callable[[str, str], bool]


@dataclass(frozen=True)
class Ask:
    """One thing a question asked for: a record of a kind (`noun`), a text in quotes, or a field (`label`)."""

    noun: str | None = None
    label: str | None = None
    quoted: bool = False
    name: str | None = None  # "More than one project matches “Home”": the name a number is to replace


def _asks(question: str) -> list[Ask]:
    if found := _SEVERAL.match(question):
        return [Ask(noun=found.group("noun"), name=found.group("name"))]
    found = _QUESTION.match(question)
    if found is None:
        return []
    asks = []
    for part in found.group("asks").split(", and "):
        ask = _ASK.match(part[:1].lower() + part[1:])
        if ask is None:
            return []  # not a question of this model's shape
        asks.append(Ask(noun=ask.group("noun"), label=ask.group("label"), quoted=bool(ask.group("quoted"))))
    return asks


def _value(text: str, ask: Ask | None = None) -> tuple[str, bool] | None:
    """The value the message gives, and whether it is a number; None when it says more than a value."""
    said = " ".join(text.split()).strip().rstrip(".!")
    if not said or said.endswith("?"):
        return None
    quoted = quoted_parts(said)
    if len(quoted) == 1:
        return quoted[0], False
    if quoted:
        return None
    if said.lower() in _NO_VALUE:
        return None
    said = _LEAD.sub("", said)
    if ask is not None and ask.noun and said.lower().startswith(ask.noun.lower() + " "):
        said = said[len(ask.noun) + 1:]  # "book 5", "project Home"
    if number := _NUMBER.match(said):
        return number.group("n"), True
    spoken = words(said)
    if not spoken or len(spoken) > MAX_VALUE_WORDS or any(stem(word) in _VERBS for word in spoken):
        return None  # "delete it", "list my tasks": a request of its own
    return said, False


def _joined(request: str, ask: Ask, value: str, number: bool) -> str | None:
    """`request` with the value written in where the model reads it for `ask`."""
    asked = request.strip().rstrip(".!?").rstrip()
    if ask.name is not None:
        if not number:
            return None
        for spelled in (f"'{ask.name}'", f"\"{ask.name}\"", f"“{ask.name}”", ask.name):
            if spelled in asked:
                before = asked[: asked.index(spelled)].rstrip()
                said = value if before.lower().endswith(ask.noun or "") else f"{ask.noun} {value}"
                return asked.replace(spelled, said, 1)
        return None
    if ask.noun is not None:
        said = value if number else f"'{value}'"
        # Right after the kind when the request names it with nothing after ("rename the book to 'Emma'" ->
        # "rename the book 5 to 'Emma'"), else at the end ("add a task 'Buy milk'" -> "… project 'Home'").
        named = re.search(rf"\b{re.escape(ask.noun)}s?\b(?!\s*['\"“‘\d#])", asked, re.IGNORECASE)
        if named is not None:
            return f"{asked[: named.end()]} {said}{asked[named.end():]}"
        return f"{asked} {ask.noun} {said}"
    if ask.quoted or ask.label is None:
        return f"{asked} '{value}'"
    return f"{asked} {ask.label} {value}" if number else f"{asked} {ask.label} '{value}'"


def _before(messages: Sequence[Message], index: int, role: str) -> int | None:
    """The index of the message of `role` right before `index`, past the page messages between."""
    for at in range(index - 1, -1, -1):
        message = messages[at]
        if is_page_message(message):
            continue
        return at if message.role == role else None
    return None


def _answer(question: str, request: str, message: str, better: Better | None) -> str | None:
    asks = _asks(question)
    if not asks:
        return None
    given = _value(message, asks[0])
    if given is None:
        return None
    value, number = given
    # A value in quotes answers the ask for a text in quotes, whichever place it has in the question.
    ask = next((a for a in asks if a.quoted), asks[0]) if message.strip()[:1] in "'\"“‘" else asks[0]
    joined = _joined(request, ask, value, number)
    if joined is None or (better is not None and not better(request, joined)):
        return None
    return joined


def answered_request(messages: Sequence[Message], index: int, better: Better | None, depth: int = 0) -> str:
    """What the person's message at `index` asks: itself, or, when it answers one of the model's questions
    for a missing value, the request asked about with the value in it. `better(earlier, joined)` says
    whether the joined request is the earlier one with more of it known (the planner's to judge; None, for a
    spec whose members hold the tools: any question it recognises is answered)."""
    text = messages[index].content
    asked_at = _before(messages, index, "assistant")
    earlier_at = _before(messages, asked_at, "user") if asked_at is not None else None
    if asked_at is None or earlier_at is None or depth >= MAX_CHAIN:
        return text
    earlier = answered_request(messages, earlier_at, better, depth + 1)
    return _answer(messages[asked_at].content, earlier, text, better) or text


def relayed_task(messages: Sequence[Message], index: int) -> str | None:
    """For a spec that hands work to members: when the person's message at `index` answers a question a
    member asked (relayed in the reply before it), that member's task with the value in it."""
    asked_at = _before(messages, index, "assistant")
    if asked_at is None:
        return None
    for block in reversed(re.split(r"\n\n(?=\*\*[\w-]+\*\* — )", messages[asked_at].content)):
        relayed = _RELAYED.match(block.strip())
        if relayed is not None:
            joined = _answer(relayed.group("said").strip(), relayed.group("task"), messages[index].content, None)
            if joined is not None:
                return joined[:1].upper() + joined[1:] + "."
    return None
