"""Reading a request: words, light stemming, action verbs, quoted and capitalised names, dates.

Plain English heuristics only; nothing here knows any app's tools.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A quote must open and close at a word boundary, so "what's" and "I'll" are not quotes.
_QUOTED = re.compile(r"""(?<!\w)'([^']+)'(?!\w)|"([^"]+)"|“([^”]+)”|‘([^’]+)’""")
_CAPITALISED = re.compile(r"\b[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*")
_NUMBERED = re.compile(r"(?:\b([a-z]+)\s+)?(?:#|\bno\.?\s*|\bnumber\s+|\bid\s+)?(?<![\w-])(\d+)\b", re.IGNORECASE)
# A placeholder in an example request ("create a task '<title>'"): it stands for a value, it is none.
_PLACEHOLDER = re.compile(r"<[^<>]+>")
_ID_PLACEHOLDER = re.compile(r"<[^<>]*\bid>")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_IN_DAYS = re.compile(r"\bin\s+(\d+)\s+days?\b", re.IGNORECASE)

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "me",
        "i",
        "to",
        "in",
        "into",
        "of",
        "for",
        "on",
        "at",
        "is",
        "are",
        "was",
        "be",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "and",
        "or",
        "with",
        "all",
        "please",
        "can",
        "could",
        "would",
        "you",
        "your",
        "we",
        "our",
        "us",
        "do",
        "does",
        "have",
        "has",
        "there",
        "here",
        "some",
        "any",
        "by",
        "from",
        "as",
        "up",
        "so",
        "just",
        "now",
        "then",
        "them",
        "they",
        "their",
        "he",
        "she",
        "his",
        "her",
        "hi",
        "hello",
        "thanks",
        "thank",
    ]
)
PREPOSITIONS = frozenset({"in", "into", "to", "under", "for", "from", "on", "at", "inside", "within"})

# Generic verbs of acting on records, mapped to one canonical action each.
ACTIONS: dict[str, tuple[str, ...]] = {
    "list": (
        "list",
        "show",
        "what",
        "which",
        "find",
        "search",
        "get",
        "view",
        "see",
        "display",
        "read",
        "lookup",
        "browse",
        "query",
        "fetch",
        "retrieve",
        "count",
    ),
    "create": ("create", "add", "new", "make", "insert", "register", "post", "write"),
    "update": ("update", "edit", "change", "rename", "set", "modify", "move", "assign", "reassign"),
    "complete": ("complete", "done", "finish", "mark", "close", "resolve", "tick", "check"),
    "delete": ("delete", "remove", "drop", "destroy", "erase", "trash", "purge"),
}


def stem(word: str) -> str:
    """A crude stemmer that maps the usual inflections of one word to one form."""
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 4 and word.endswith("sses"):
        word = word[:-2]
    elif len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case words of `text`, splitting snake_case and camelCase."""
    return [token.lower() for token in _WORD.findall(_CAMEL.sub(" ", text))]


def stems(text: str, *, keep_stopwords: bool = False) -> list[str]:
    return [stem(w) for w in words(text) if keep_stopwords or w not in STOPWORDS]


_ACTION_OF_STEM = {stem(word): action for action, verbs in ACTIONS.items() for word in verbs}
#: The stems of every generic action verb.
ACTION_STEMS = frozenset(_ACTION_OF_STEM)


def action_of(word_stem: str) -> str | None:
    return _ACTION_OF_STEM.get(word_stem)


@dataclass(frozen=True)
class Name:
    """A name the user wrote: quoted or capitalised, with the word before it (a noun or preposition)."""

    text: str
    quoted: bool
    noun: str | None  # stemmed noun right before it ("the project Home" -> "project")
    preposition: str | None  # "in Home" -> "in"
    start: int


@dataclass(frozen=True)
class Request:
    """What the offline model reads out of one user message."""

    text: str
    stems: frozenset[str]  # content words, stemmed, quoted names excluded
    actions: frozenset[str]
    names: tuple[Name, ...]
    numbers: tuple[tuple[str | None, int], ...]  # (stemmed noun before it or None, value)
    date: dt.date | None
    placeholders: tuple[Name, ...] = ()  # "'<title>'" in an example sent back as it is: where a value goes


def _word_before(text: str, index: int) -> tuple[str | None, str | None]:
    """(noun, preposition) from the words right before position `index`, skipping articles."""
    before = [w.lower() for w in _WORD.findall(text[:index])]
    while before and before[-1] in {"the", "a", "an", "my", "our", "your"}:
        before.pop()
    if not before:
        return None, None
    last = before[-1]
    if last in PREPOSITIONS:
        return None, last
    if last in {"called", "named", "titled"} and len(before) > 1:
        return stem(before[-2]), None
    if last in STOPWORDS or action_of(stem(last)):
        return None, None
    return stem(last), None


def quoted_parts(text: str) -> list[str]:
    """The quoted strings in `text`, in order ("'Buy milk'", "“Home”", ...)."""
    return [next(group for group in match.groups() if group is not None).strip() for match in _QUOTED.finditer(text)]


def without_quotes(text: str) -> str:
    """`text` with its quoted parts blanked out (same length, so positions still line up)."""
    return _QUOTED.sub(lambda m: " " * len(m.group(0)), text)


def is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.fullmatch(value.strip()))


def filled(text: str) -> str:
    """An example request with its placeholders given values, as a person would send it (how an example is
    checked before it is shown): an id a number, anything else a name."""
    return _PLACEHOLDER.sub("Example", _ID_PLACEHOLDER.sub("1", text))


def _names(text: str) -> tuple[list[Name], list[Name], str]:
    names: list[Name] = []
    placeholders: list[Name] = []
    for match in _QUOTED.finditer(text):
        value = next(group for group in match.groups() if group is not None).strip()
        if value:
            noun, preposition = _word_before(text, match.start())
            found = Name(value, True, noun, preposition, match.start())
            (placeholders if is_placeholder(value) else names).append(found)
    # Blank the quoted parts out so their words are not matched again as capitalised names or words.
    unquoted = without_quotes(text)
    for match in _CAPITALISED.finditer(unquoted):
        value = match.group(0)
        first_word = not _WORD.findall(unquoted[: match.start()])
        if value == "I" or (first_word and " " not in value):
            continue  # the sentence's first word is capitalised for grammar, not because it is a name
        if first_word:
            value = value.split(None, 1)[1]
        noun, preposition = _word_before(unquoted, unquoted.index(value, match.start()))
        if action_of(stem(value)) or value.lower() in STOPWORDS:
            continue
        names.append(Name(value, False, noun, preposition, match.start()))
    names.sort(key=lambda name: name.start)
    return names, placeholders, unquoted


def _date(text: str, today: dt.date) -> dt.date | None:
    lowered = text.lower()
    if match := _ISO_DATE.search(text):
        try:
            return dt.date.fromisoformat(match.group(1))
        except ValueError:
            return None
    if "day after tomorrow" in lowered:
        return today + dt.timedelta(days=2)
    if re.search(r"\btomorrow\b", lowered):
        return today + dt.timedelta(days=1)
    if re.search(r"\btoday\b", lowered):
        return today
    if match := _IN_DAYS.search(text):
        return today + dt.timedelta(days=int(match.group(1)))
    if re.search(r"\bnext week\b", lowered):
        return today + dt.timedelta(days=7)
    return None


def read_request(text: str, *, today: dt.date) -> Request:
    """Parse one user message."""
    names, placeholders, unquoted = _names(text)
    without_dates = _ISO_DATE.sub(" ", unquoted)
    content = [stem(w) for w in words(without_dates) if w not in STOPWORDS or w in ("what", "which")]
    actions = {action for s in content if (action := action_of(s))}
    if text.rstrip().endswith("?") and not actions:
        actions.add("list")
    numbers = tuple(
        (stem(noun) if noun and noun.lower() not in STOPWORDS else None, int(value))
        for noun, value in _NUMBERED.findall(without_dates)
    )
    return Request(
        text=text,
        stems=frozenset(content),
        actions=frozenset(actions),
        names=tuple(names),
        numbers=numbers,
        date=_date(text, today),
        placeholders=tuple(placeholders),
    )
