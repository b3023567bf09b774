"""The page the person has open, as the turn sends it, and the words of a request that point at it.

When the panel is open on a page that shows one record, the turn puts one user message right before the
person's latest message: a `<page_context>` start tag, a sentence saying the JSON is data, one line of
JSON (`path`, `model`, `kind`, `id`, `label`, `fields`) and the end tag. That message is never the
person's request; it only says what "this", "here" and "it" mean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import Message
from .text import PREPOSITIONS, STOPWORDS, stem, words

PAGE_START = "<page_context>"
PAGE_END = "</page_context>"

# Words that point at what the person is looking at rather than name it.
_POINTING = re.compile(r"\b(?:this|here|it|current)\b", re.IGNORECASE)
# "this task", "the current project": the word after the pointer names which kind is meant.
_POINTED_KIND = re.compile(r"\b(?:this|current)\s+([a-z][\w-]*)", re.IGNORECASE)
# Asking what the page shows, rather than asking to do something with it.
_ABOUT = re.compile(
    r"^\s*(?:please\s+)?(?:"
    r"what(?:'s|’s| is)\s+(?:this|it|here)\b(?!\s+(?:for|about)\b)"
    r"|what\s+am\s+i\s+(?:looking\s+at|seeing)"
    r"|what(?:'s|’s| is)\s+on\s+(?:this|the)\s+page"
    r"|(?:tell|show)\s+me\s+(?:more\s+)?about\s+(?:this|it)\b"
    r"|(?:describe|summari[sz]e|explain)\s+(?:this|it)\b"
    r"|(?:show|give)\s+me\s+(?:the\s+)?details\s+of\s+(?:this|it)\b"
    r"|(?:details|info)\s+(?:of|on|about)\s+(?:this|it)\b"
    r")",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Page:
    """One record the person has open: its kind (the model's verbose name), id, label and fields."""

    kind: str
    id: Any
    label: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""
    path: str = ""

    @property
    def kind_stems(self) -> frozenset[str]:
        """`task` for "task", and each word of a longer name ("time entry" -> time, entry, timeentry)."""
        found = {stem(word) for word in words(self.kind)}
        if len(found) > 1:
            found.add(stem("".join(words(self.kind))))
        tail = self.model.rpartition(".")[2]
        if tail:
            found.add(stem(tail))
        return frozenset(found)

    def is_kind(self, noun: str | None) -> bool:
        return noun is not None and noun in self.kind_stems

    def name(self) -> str:
        """How a reply names it: the label the page gave, else the kind and id."""
        return self.label or f"the {self.kind} #{self.id}"


def is_page_message(message: Message) -> bool:
    content = message.content.strip()
    return message.role == "user" and content.startswith(PAGE_START) and content.endswith(PAGE_END)


def read_page(content: str) -> Page | None:
    """The page a `<page_context>` message describes, or None when it holds no record."""
    inner = content.strip()[len(PAGE_START) : -len(PAGE_END)]
    for line in inner.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        kind = value.get("kind") or str(value.get("model") or "").rpartition(".")[2]
        if not isinstance(kind, str) or not kind or value.get("id") in (None, ""):
            continue
        fields = value.get("fields")
        return Page(
            kind=kind,
            id=value["id"],
            label=str(value.get("label") or ""),
            fields=fields if isinstance(fields, dict) else {},
            model=str(value.get("model") or ""),
            path=str(value.get("path") or ""),
        )
    return None


def person_and_page(messages: Sequence[Message]) -> tuple[int | None, Page | None]:
    """The index of the person's latest message, and the page sent with it (if any).

    The page counts only when it came after the person's previous message: a page of an earlier turn
    says nothing about what "this" means now.
    """
    people = [i for i, m in enumerate(messages) if m.role == "user" and not is_page_message(m)]
    if not people:
        return None, None
    latest = people[-1]
    since = people[-2] if len(people) > 1 else -1
    for index in range(latest - 1, since, -1):
        if is_page_message(messages[index]):
            return latest, read_page(messages[index].content)
    return latest, None


def points(text: str) -> bool:
    """Whether the request points at something ("this", "here", "it") instead of naming it."""
    return bool(_POINTING.search(text))


def pointed_kind(text: str) -> str | None:
    """The stemmed kind a pointer names ("this task" -> "task"), or None ("this", "here")."""
    for match in _POINTED_KIND.finditer(text):
        word = match.group(1).lower()
        if word not in STOPWORDS and word not in PREPOSITIONS:
            return stem(word)
    return None


def asks_about(text: str) -> bool:
    """"What is this?", "tell me about this": asking what the page shows."""
    return bool(_ABOUT.search(text))


def describe_page(page: Page, noun_fits: bool = True) -> str:
    """A reply about the record from the fields the page sent."""
    facts = []
    for key, value in page.fields.items():
        if key in ("id", "pk") or value in (None, "", [], {}):
            continue
        if isinstance(value, dict | list):
            continue
        shown = "yes" if value is True else "no" if value is False else str(value)
        if len(shown) > 200:
            shown = shown[:197] + "…"
        facts.append(f"- {key.replace('_', ' ')}: {shown}")
    name = page.name()
    heading = f"This is {name}." if noun_fits else f"This page shows {name}."
    return heading + ("\n" + "\n".join(facts) if facts else "")


_HERE = re.compile(r"\bhere\b", re.IGNORECASE)
_THIS = re.compile(r"\b(?:this|current|the\s+current)(?:\s+([a-z][\w-]*))?|\bit\b", re.IGNORECASE)


def named(text: str, page: Page) -> str:
    """The request with its pointers replaced by the page's record named in words, for a member that is
    handed the task and sees no page: "archive this" -> "archive the project 'Home'", "add a task 'x' here" ->
    "add a task 'x' in the project 'Home'". A record without a name is named by its id."""
    name = str(page.fields.get("name") or page.fields.get("title") or "").strip().replace("'", "’")
    called = f"the {page.kind} '{name}'" if name else f"the {page.kind} {page.id}"

    def this(match: re.Match[str]) -> str:
        noun = match.group(1) if match.lastindex else None
        if noun and not page.is_kind(stem(noun.lower())):
            return match.group(0)  # "this task" on a project's page is not the project
        return called

    return _HERE.sub(f"in {called}", _THIS.sub(this, text))
