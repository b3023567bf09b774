"""Reading tools: what each does (an action on a noun) and what its arguments mean, from the
name, description and JSON Schema alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import ToolSpec
from .text import action_of, stem, stems, words

# Names a form gives its main free-text field, best first.
TEXT_FIELD_NAMES = ("title", "name", "subject", "summary", "label", "text", "content", "body", "message")
SEARCH_FIELD_NAMES = ("search", "q", "query", "term", "keyword", "keywords", "text")


@dataclass(frozen=True)
class Reference:
    """An argument holding the id of a record: `noun` says which kind (`project`, `task`)."""

    prop: str
    noun: str
    own: bool  # the record the tool acts on (e.g. the `pk` of a delete), not a related one
    choices: Mapping[str, Any] = field(default_factory=dict)  # label (casefolded) -> value, if listed


@dataclass(frozen=True)
class ToolInfo:
    spec: ToolSpec
    name: str
    action: str | None
    nouns: tuple[str, ...]
    name_stems: frozenset[str]
    description_stems: frozenset[str]
    properties: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...]
    references: tuple[Reference, ...]
    text_field: str | None
    search_field: str | None

    @property
    def is_read(self) -> bool:
        return self.action == "list"

    @property
    def primary_noun(self) -> str | None:
        return self.nouns[-1] if self.nouns else None

    def enum_values(self) -> dict[str, tuple[str, Any]]:
        """stemmed enum value -> (property, value), for values a user may write as a word."""
        found: dict[str, tuple[str, Any]] = {}
        for prop, schema in self.properties.items():
            for value in schema.get("enum") or ():
                if isinstance(value, str) and value and not value.startswith("-"):
                    found.setdefault(stem(value), (prop, value))
        return found

    def date_fields(self) -> list[str]:
        return [p for p, s in self.properties.items() if s.get("format") in ("date", "date-time")]


def _first_action(text: str) -> str | None:
    for word in words(text)[:4]:
        if action := action_of(stem(word)):
            return action
    return None


def analyse_tools(tools: Sequence[ToolSpec]) -> list[ToolInfo]:
    """ToolInfo for each tool; nouns shared by every tool name (an app prefix) are dropped."""
    name_stems = [[stem(w) for w in words(t.name)] for t in tools]
    common: set[str] = set.intersection(*(set(s) for s in name_stems)) if len(tools) > 1 else set()
    raw_nouns = [
        tuple(s for s in stems_ if not action_of(s) and s not in common) or tuple(s for s in stems_ if not action_of(s))
        for stems_ in name_stems
    ]
    read_nouns = {
        noun
        for tool, nouns, stems_ in zip(tools, raw_nouns, name_stems, strict=True)
        if _tool_action(tool, stems_) == "list"
        for noun in nouns
    }
    return [
        _analyse(tool, stems_, nouns, read_nouns)
        for tool, stems_, nouns in zip(tools, name_stems, raw_nouns, strict=True)
    ]


def _tool_action(tool: ToolSpec, name_stems: list[str]) -> str | None:
    for s in reversed(name_stems):  # `task_list` and `list_tasks` both name the action
        if action := action_of(s):
            return action
    return _first_action(tool.description)


def _analyse(tool: ToolSpec, name_stems: list[str], nouns: tuple[str, ...], read_nouns: set[str]) -> ToolInfo:
    parameters = tool.parameters or {}
    properties: dict[str, Mapping[str, Any]] = dict(parameters.get("properties") or {})
    required = tuple(parameters.get("required") or ())
    action = _tool_action(tool, name_stems)
    primary = nouns[-1] if nouns else None
    references = []
    for prop, schema in properties.items():
        noun = _reference_noun(prop, schema, primary, read_nouns)
        if noun is not None:
            references.append(
                Reference(prop, noun, own=(noun == primary and action != "create"), choices=_choices(schema))
            )
    referenced = {r.prop for r in references}
    text_candidates = [
        p
        for p, s in properties.items()
        if s.get("type", "string") == "string" and not s.get("enum") and not s.get("format") and p not in referenced
    ]
    text_field = next((p for n in TEXT_FIELD_NAMES for p in text_candidates if p.lower() == n), None)
    if text_field is None:
        text_field = next((p for p in text_candidates if p in required and p not in SEARCH_FIELD_NAMES), None)
    search_field = next((p for n in SEARCH_FIELD_NAMES for p in text_candidates if p.lower() == n), None)
    if action == "list":
        text_field = None  # a read tool filters; it has nothing to name
    return ToolInfo(
        spec=tool,
        name=tool.name,
        action=action,
        nouns=nouns,
        name_stems=frozenset(name_stems),
        description_stems=frozenset(stems(tool.description)),
        properties=properties,
        required=required,
        references=tuple(references),
        text_field=text_field,
        search_field=search_field,
    )


def _reference_noun(prop: str, schema: Mapping[str, Any], primary: str | None, read_nouns: set[str]) -> str | None:
    """Which kind of record this argument identifies, or None when it is not an id."""
    lowered = prop.lower()
    kind = schema.get("type")
    if kind not in ("integer", "string", None) or schema.get("enum") or schema.get("format"):
        return None
    if lowered in ("id", "pk", "object_id"):
        return primary
    for suffix in ("_id", "_pk"):
        if lowered.endswith(suffix) and len(lowered) > len(suffix):
            return stem(lowered[: -len(suffix)])
    if prop.endswith("Id") and len(prop) > 2:  # camelCase: taskId
        return stem(prop[:-2])
    description = set(words(str(schema.get("description", ""))))
    if kind == "integer" and stem(lowered) in read_nouns:
        return stem(lowered)
    if kind == "integer" and ("id" in description or {"primary", "key"} <= description):
        return stem(lowered)
    if _choices(schema):
        return stem(lowered)
    return None


def _choices(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`oneOf: [{"const": 7, "title": "Home"}, ...]` as {"home": 7}: ids a form listed with labels."""
    options = schema.get("oneOf") or schema.get("anyOf") or ()
    return {
        str(option["title"]).casefold(): option["const"]
        for option in options
        if isinstance(option, Mapping) and "const" in option and "title" in option
    }
