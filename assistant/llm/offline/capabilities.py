"""What the offline model can do for the person: the tools offered to them (which already reflect their
permissions), in words, grouped by the kind of record, each with an example request the model itself
understands — every example is checked against the model before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .greetings import HELLO
from .page import Page
from .results import plural
from .schema import ToolInfo
from .text import action_of, stem, words

# "What can you do?", "help", "what are you able to do here?", "how can you help me?", after a hello or not
_ASKS = re.compile(
    rf"^\s*(?:{HELLO})?[\s,!.]*(?:please\s+)?(?:"
    r"help(?:\s+me)?"
    r"|\?+"
    r"|what\s+(?:else\s+)?(?:can|could|do|would)\s+(?:you|i)\s+(?:do|ask|help(?:\s+(?:me\s+)?with)?)(?:\s+(?:you|for\s+me|with\s+you))?"
    r"|what\s+(?:are|were)\s+you\s+(?:able|allowed)\s+to\s+do"
    r"|what\s+(?:are|is)\s+(?:your|the)\s+(?:skills|capabilities|abilities|features|tools|commands|options)"
    r"|what\s+tools\s+(?:do\s+you\s+have|can\s+you\s+use)"
    r"|how\s+(?:can|could|do)\s+(?:you|i)\s+(?:help|use\s+you|start)(?:\s+me)?"
    r"|(?:show|list|tell)\s+(?:me\s+)?(?:what\s+you\s+can\s+do|your\s+(?:skills|capabilities|tools|commands))"
    r"|what\s+(?:do\s+you\s+do|are\s+you(?:\s+for)?)"
    r"|who\s+are\s+you"
    r"|commands|capabilities"
    r")(?:\s+(?:here|now|today|on\s+this\s+page|in\s+this\s+app|for\s+me))*[\s?!.]*$",
    re.IGNORECASE,
)
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
_BY_ID = re.compile(r",?\s*(?:by|given|with)\s+(?:its|the\s+\w+(?:'s|’s)?)\s+id\b", re.IGNORECASE)
_CANONICAL = {"list": "list", "create": "create", "update": "change", "complete": "complete", "delete": "delete"}

Understood = Callable[[str, ToolInfo, "Page | None"], bool]


def asks_what_i_can_do(text: str) -> bool:
    return bool(_ASKS.match(text))


def purpose(info: ToolInfo) -> str:
    """The tool's first sentence in words, without its technical asides ("(archived=true)", "by its id")."""
    # The first sentence, up to a colon or semicolon that starts the how ("...: give the book's id").
    sentence = re.split(r"(?<=[.!?])\s+|[;:]\s+", info.spec.description.strip())[0].rstrip(".;:")
    sentence = _BY_ID.sub("", _PARENTHESES.sub("", sentence)).strip(" ,")
    if not sentence:
        return info.name.replace("_", " ")
    return sentence[:1].upper() + sentence[1:]


def _said(info: ToolInfo, word_stem: str | None) -> str:
    """A stemmed word as the tool's name spells it ("stat" -> "stats")."""
    if word_stem is None:
        return "record"
    spelled = [w for w in words(info.name) if stem(w) == word_stem]
    return min(spelled, key=len) if spelled else word_stem


def _verb(info: ToolInfo) -> str:
    """The word the tool's description starts with when it is the tool's action ("Add a book", "Rename ...")."""
    first = next(iter(words(info.spec.description)), "")
    if info.verb is not None and stem(first) == info.verb:
        return first
    if info.action is not None and action_of(stem(first)) == info.action:
        return first
    return _CANONICAL.get(info.action or "", first or "use")


def _placeholder(noun: str, infos: Sequence[ToolInfo]) -> str:
    """How an example names a record: by a placeholder for its title or name when a read can find it, else
    for its id. A placeholder reads as one in the panel, and sent back as it is the model asks for its value."""
    readers = [info for info in infos if info.is_read and noun in info.nouns and info.search_field]
    if not readers:
        return f"{noun} <id>"
    label = next((prop for prop in ("title", "name", "label", "subject") if prop in readers[0].properties), "name")
    return f"the {noun} '<{label}>'"


def _page_fits(info: ToolInfo, page: Page | None) -> bool:
    """Whether the tool takes the page's record (a list's filter on its own ids does not count)."""
    return page is not None and any(
        page.is_kind(reference.noun) for reference in info.references if not (info.is_read and reference.own)
    )


def _candidates(info: ToolInfo, infos: Sequence[ToolInfo], page: Page | None) -> list[str]:
    subject = info.primary_noun or "record"
    noun = _said(info, subject)
    verb = _verb(info)
    own = next((r for r in info.references if r.own), None)
    related = [r for r in info.references if not r.own and r.prop in info.required]
    text = f"'<{info.text_field.replace('_', ' ')}>'" if info.text_field else ""
    found: list[str] = []
    if info.is_read or (info.action is None and info.verb is None):
        aspects = [_said(info, n) for n in info.nouns if n != subject and n in info.name_stems]
        aspects = [aspect if aspect.endswith("s") else plural(aspect, 2) for aspect in aspects]
        if own is not None and own.prop in info.required:
            here = f"this {own.noun}" if _page_fits(info, page) else _placeholder(own.noun, infos)
            for aspect in aspects[-1:] or ["details"]:
                found += [f"show the {aspect} of {here}", f"{aspect} of {here}"]
        else:
            found += [f"list my {plural(noun, 2)}", f"show my {plural(noun, 2)}"]
            if _page_fits(info, page):
                found.insert(0, f"list the {plural(noun, 2)} here")
        return found
    if info.action == "create":
        where = ""
        joining = "to" if verb == "add" else "in"
        for reference in related:
            where += " here" if page is not None and page.is_kind(reference.noun) else (
                f" {joining} {_placeholder(reference.noun, infos)}")
        return [f"{verb} a {noun} {text}{where}".replace("  ", " ").strip(),
                f"create a {noun} {text}{where}".replace("  ", " ").strip()]
    if own is not None:
        target = f"this {noun}" if page is not None and page.is_kind(own.noun) else _placeholder(own.noun, infos)
        tail = f" to '{_new_text(info)}'" if info.text_field and info.action == "update" else ""
        if info.action == "complete" and verb == "mark":
            tail = " done"
        found += [f"{verb} {target}{tail}", f"{_CANONICAL.get(info.action or '', verb)} {target}{tail}"]
    return found


def _new_text(info: ToolInfo) -> str:
    return f"<new {(info.text_field or 'name').replace('_', ' ')}>"


def example(info: ToolInfo, infos: Sequence[ToolInfo], page: Page | None, understood: Understood) -> str | None:
    """A request the model maps to `info` (checked with `understood`), or None when none of the forms do."""
    for candidate in dict.fromkeys(_candidates(info, infos, page)):
        if understood(candidate, info, page):
            return candidate
    return None


def capabilities(
    infos: Sequence[ToolInfo],
    understood: Understood,
    *,
    page: Page | None = None,
    intro: str = "",
    with_names: bool = False,
) -> str:
    """The person's tools as a Markdown list, grouped by the kind of record, each with an example."""
    if not infos:
        return (intro + "\n\n" if intro else "") + (
            "I'm the offline demo model and no tools are offered to you here, so I can only chat."
        )
    groups: dict[str, list[str]] = {}
    for info in infos:
        shown = example(info, infos, page, understood)
        line = f"- {purpose(info)}"
        if shown:
            line += f" — e.g. “{shown}”"
        if with_names:
            line += f" (`{info.name}`)"
        heading = plural(_said(info, info.primary_noun), 2)
        if page is not None and _page_fits(info, page):
            heading = f"Here, on {page.name()}"
        groups.setdefault(heading, []).append(line)
    here = [key for key in groups if key.startswith("Here, on ")]
    ordered = here + [key for key in groups if key not in here]
    body = "\n\n".join(f"**{key[:1].upper() + key[1:]}**\n" + "\n".join(groups[key]) for key in ordered)
    outro = (
        "\n\nI'm the offline demo model: say what to do and to what, with names in quotes, one request at a time."
        + (" Put your own values where an example has <angle brackets>." if "<" in body else "")
    )
    return (intro + "\n\n" if intro else "") + body + outro

