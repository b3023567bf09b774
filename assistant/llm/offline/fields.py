"""Values for a tool's fields from the phrases of a request: "by Frank Herbert", "author 'X'",
"with estimate hours 3", "titled 'Dune'".

A field is found by its property name (`due_date` -> "due date") or the label its description starts
with ("Author. Who wrote it." -> "author"); "by" fills the field that names who made the thing (an
author, an artist, a creator), whatever the schema calls it among those words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .schema import TEXT_FIELD_NAMES, ToolInfo, types_of
from .text import ACTIONS, stem, words

# Nouns for whoever made a thing, which "by X" fills.
MAKER_WORDS = frozenset(
    stem(w)
    for w in (
        "author", "writer", "artist", "creator", "composer", "director", "maker", "painter", "performer",
        "photographer", "band", "singer", "designer", "illustrator", "poet", "novelist", "byline", "by",
    )
)
# A value: quoted, a run of capitalised words ("Frank Herbert", "J. R. R. Tolkien"), or a number.
_QUOTED_VALUE = r"""'(?P<q1>[^']+)'(?!\w)|"(?P<q2>[^"]+)"|“(?P<q3>[^”]+)”|‘(?P<q4>[^’]+)’"""
_CAPITALISED_VALUE = r"(?P<cap>[A-Z][\w.'’-]*(?:\s+(?:[A-Z][\w.'’-]*|of|the|de|van|von|la|le|du|da))*(?<![\s]))"
_NUMBER_VALUE = r"(?P<num>-?\d+(?:\.\d+)?)"
_JOIN = r"\s*(?::|=|\bis\b|\bas\b|\bof\b|\bset\s+to\b|\bto\b)?\s*"
_TRAILING_JOINERS = re.compile(r"(?:\s+(?:of|the|de|van|von|la|le|du|da))+$")
_VERBS = frozenset(verb for verbs in ACTIONS.values() for verb in verbs)


@dataclass(frozen=True)
class Found:
    prop: str
    value: Any
    start: int
    end: int


def _value(match: re.Match[str]) -> tuple[str, bool] | None:
    """The matched value's text and whether it was a number."""
    groups = match.groupdict()
    for group in ("q1", "q2", "q3", "q4"):
        if groups.get(group):
            return groups[group].strip(), False
    if groups.get("cap"):
        text = _TRAILING_JOINERS.sub("", match.group("cap")).strip()
        if text.lower() in _VERBS:
            return None
        return text, False
    if groups.get("num"):
        return match.group("num"), True
    return None


def _labels(prop: str, schema: Mapping[str, Any]) -> list[str]:
    """How a request may name the field: its own words, and its description's opening label."""
    found = [" ".join(words(prop))]
    description = str(schema.get("description", ""))
    label = description.split(".", 1)[0].strip()
    if label and len(label.split()) <= 3 and "id" not in words(label) and not label.lower().startswith("only rows"):
        found.append(" ".join(words(label)))
    return [label for label in dict.fromkeys(found) if label]


def _convert(schema: Mapping[str, Any], text: str, numeric: bool) -> Any:
    kinds = types_of(schema)
    if "integer" in kinds and numeric and re.fullmatch(r"-?\d+", text):
        return int(text)
    if "number" in kinds and numeric:
        return float(text) if "." in text else int(text)
    if "string" in kinds and not schema.get("enum") and not schema.get("format"):
        return text
    return None


def maker_field(info: ToolInfo) -> str | None:
    """The text field "by X" fills: `author`, `artist`, ... (a read's `author__contains` first)."""
    candidates = [
        prop
        for prop, schema in info.properties.items()
        if "string" in types_of(schema) and not schema.get("enum") and not schema.get("format")
        and stem(words(prop.split("__", 1)[0])[-1] if words(prop.split("__", 1)[0]) else "") in MAKER_WORDS
    ]
    if not candidates:
        return None
    if info.is_read:
        contains = [p for p in candidates if p.endswith("__contains")]
        plain = [p for p in candidates if "__" not in p]
        return (contains or plain or candidates)[0]
    plain = [p for p in candidates if "__" not in p]
    return plain[0] if plain else None


def field_values(text: str, info: ToolInfo, skip: frozenset[str] | set[str] = frozenset()) -> list[Found]:
    """Values the request gives fields of `info` by naming them (or "by" for a maker field)."""
    found: list[Found] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    maker = maker_field(info)
    if maker is not None and maker not in skip:
        pattern = re.compile(rf"\bby\s+(?:{_QUOTED_VALUE}|{_CAPITALISED_VALUE})")
        for match in pattern.finditer(text):
            value = _value(match)
            if value is not None and free(match.start(), match.end()):
                found.append(Found(maker, value[0], match.start(), match.end()))
                taken.append((match.start(), match.end()))
                break
    if info.is_read:
        # "titled 'Emma'", "named Home": a read filters on the text field it names.
        for name in TEXT_FIELD_NAMES:
            prop = f"{name}__contains" if f"{name}__contains" in info.properties else None
            if prop is None or prop in skip:
                continue
            naming = rf"(?i:\b(?:titled|called|named|with\s+(?:the\s+)?{name})\s+)"
            pattern = re.compile(rf"{naming}(?:{_QUOTED_VALUE}|{_CAPITALISED_VALUE})")
            named = next((m for m in pattern.finditer(text) if free(m.start(), m.end())), None)
            value = _value(named) if named is not None else None
            if named is not None and value is not None:
                found.append(Found(prop, value[0], named.start(), named.end()))
                taken.append((named.start(), named.end()))
            break
    for prop, schema in info.properties.items():
        if prop in skip or "__" in prop or prop in {f.prop for f in found}:
            continue
        if types_of(schema) - {"string", "integer", "number"} or schema.get("enum") or schema.get("format"):
            continue  # enums, dates and flags are read from their values (see model.py)
        numeric = bool(types_of(schema) & {"integer", "number"})
        value_pattern = _NUMBER_VALUE if numeric else f"{_QUOTED_VALUE}|{_CAPITALISED_VALUE}"
        for label in _labels(prop, schema):
            spaced = r"[\s_-]+".join(re.escape(part) for part in label.split())
            # The label and its joining words in any case; a capitalised value keeps its case.
            pattern = re.compile(rf"(?i:\b(?:with\s+(?:the\s+|a\s+|an\s+)?)?{spaced}{_JOIN})(?:{value_pattern})")
            labelled = next((m for m in pattern.finditer(text) if free(m.start(), m.end())), None)
            if labelled is None:
                continue
            match = labelled
            value = _value(match)
            converted = None if value is None else _convert(schema, *value)
            if converted is None:
                continue
            found.append(Found(prop, converted, match.start(), match.end()))
            taken.append((match.start(), match.end()))
            break
    return found

