"""Reading tools: what each does (an action on a noun) and what its arguments mean, from the
name, description and JSON Schema alone."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import ToolSpec
from .text import action_of, quoted_parts, stem, stems, without_quotes, words

# Names a form gives its main free-text field, best first.
TEXT_FIELD_NAMES = ("title", "name", "subject", "summary", "label", "text", "content", "body", "message")
SEARCH_FIELD_NAMES = ("search", "q", "query", "term", "keyword", "keywords", "text")

_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# "todo = To do", "3 = high": how schemas and descriptions usually spell out what a stored value means.
_LABELLED = re.compile(r"(?<![\w-])(-?[\w.-]+)\s*=\s*([^,;.()=]+?)\s*(?=[,;.()]|$)")
# Words that tie a defined term to its definition ("Open tasks are those whose ..."), not part of the term.
_DEFINITION_GLUE = frozenset(stems("those whose which where mean means ones one called count counts as like"))
# "Archive a project (archived=true) or bring it back (archived=false)": the words that set a flag either way.
_FLAG = re.compile(r"([^,;.()]+?)\s*\(\s*([A-Za-z_]\w*)\s*=\s*(true|false)\s*\)", re.IGNORECASE)
_FLAG_GLUE = frozenset({"or", "and", "to", "also", "then"})


@dataclass(frozen=True)
class Reference:
    """An argument holding the id of a record: `noun` says which kind (`project`, `task`)."""

    prop: str
    noun: str
    own: bool  # the record the tool acts on (e.g. the `pk` of a delete), not a related one
    choices: Mapping[str, Any] = field(default_factory=dict)  # label (casefolded) -> value, if listed
    by_name: bool = False  # the schema also takes the record's name here, so no lookup is needed


@dataclass(frozen=True)
class Definition:
    """A word the tool's description defines in terms of argument values.

    'Open tasks are those whose status is "todo" or "doing" (filter with status__in)' defines
    `open` as `{"status__in": ["todo", "doing"]}`.
    """

    stems: frozenset[str]
    arguments: Mapping[str, Any]


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
    definitions: tuple[Definition, ...] = ()
    # field -> {stored value (as text) -> label}, from this tool's schema first, then the other tools'.
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The tool's own verb when it is none of the generic actions ("archive" in `project_archive`, whose
    # description starts "Archive a project"), stemmed.
    verb: str | None = None
    # The kind of record the tool is about: `project` for `project_stats`, whose last word names an aspect.
    subject: str | None = None
    # boolean property -> {stem of a word that sets it -> value}, from the property's name and the
    # description's "(archived=true)" / "(archived=false)" phrases.
    flags: Mapping[str, Mapping[str, bool]] = field(default_factory=dict)

    @property
    def is_read(self) -> bool:
        return self.action == "list"

    @property
    def primary_noun(self) -> str | None:
        return self.subject or (self.nouns[-1] if self.nouns else None)

    def enum_values(self) -> dict[str, tuple[str, Any]]:
        """stemmed enum value or one-word label -> (property, value), for values a user may write as a word."""
        found: dict[str, tuple[str, Any]] = {}
        for prop, schema in self.properties.items():
            values = schema.get("enum") or ()
            if any(isinstance(value, str) and value.startswith("-") for value in values):
                continue  # a sort order ("priority", "-priority"): naming a field is not asking to sort by it
            for value in values:
                if isinstance(value, str) and value:
                    found.setdefault(stem(value), (prop, value))
        # Labels after the values themselves, so a value always wins over another value's label.
        for prop, schema in self.properties.items():
            labels = self.labels.get(_base(prop), {})
            for value in schema.get("enum") or ():
                label = labels.get(str(value), "")
                if label and len(words(label)) == 1 and not isinstance(value, bool):
                    found.setdefault(stem(label), (prop, value))
        return found

    def date_fields(self) -> list[str]:
        return [p for p, s in self.properties.items() if s.get("format") in ("date", "date-time")]


def _first_action(text: str) -> str | None:
    for word in words(text)[:4]:
        if action := action_of(stem(word)):
            return action
    return None


def types_of(schema: Mapping[str, Any]) -> set[str]:
    """The JSON types a property accepts, without "null" (`["integer", "string", "null"]` and the like)."""
    kind = schema.get("type")
    if kind is None:
        return set()
    kinds = {kind} if isinstance(kind, str) else {k for k in kind if isinstance(k, str)}
    return kinds - {"null"}


def _base(prop: str) -> str:
    """The field a filter argument is about: `status__in` -> `status`, `project__name` -> `project`."""
    return prop.split("__", 1)[0].lower()


def _allowed(schema: Mapping[str, Any]) -> list[Any]:
    """The values a property (or each item of an array property) may take, when it lists them."""
    items = schema.get("items")
    if "array" in types_of(schema) and isinstance(items, Mapping):
        return list(items.get("enum") or ())
    return list(schema.get("enum") or ())


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def _mentioned(sentence: str, properties: Mapping[str, Any]) -> list[str]:
    """Properties a sentence names (`status__in`, or `Priority` for `priority`), in order."""
    by_lower = {prop.lower(): prop for prop in properties}
    found = [by_lower[word.lower()] for word in _IDENTIFIER.findall(sentence) if word.lower() in by_lower]
    return list(dict.fromkeys(found))


def _labels_of(tool: ToolSpec) -> dict[str, dict[str, str]]:
    """field -> {value -> label} from a tool's property descriptions and its own description."""
    properties: Mapping[str, Mapping[str, Any]] = (tool.parameters or {}).get("properties") or {}
    found: dict[str, dict[str, str]] = {}

    def take(props: Sequence[str], text: str) -> None:
        for raw_value, label in _LABELLED.findall(text):
            for prop in props:
                if raw_value in {str(v) for v in _allowed(properties[prop])}:
                    found.setdefault(_base(prop), {}).setdefault(raw_value, label.strip())

    for prop, schema in properties.items():
        take([prop], str(schema.get("description", "")))
    for sentence in _sentences(tool.description):
        take(_mentioned(sentence, properties), sentence)
    return found


def _definitions(
    description: str, properties: Mapping[str, Mapping[str, Any]], nouns: Sequence[str]
) -> list[Definition]:
    """Words a description defines with quoted argument values (see `Definition`)."""
    found = []
    for sentence in _sentences(description):
        quoted = quoted_parts(sentence)
        mentioned = _mentioned(sentence, properties)
        if not quoted or not mentioned:
            continue
        fitting = [p for p in mentioned if set(quoted) <= {str(v) for v in _allowed(properties[p])}]
        if not fitting:
            continue
        # Several values need a property that takes a list (`status__in`); one value the plain one.
        wants_list = len(quoted) > 1
        prop = next((p for p in fitting if ("array" in types_of(properties[p])) == wants_list), None)
        if prop is None:
            continue
        by_text = {str(v): v for v in _allowed(properties[prop])}
        values = [by_text[q] for q in quoted]
        # The term is what the sentence says before it names a property or a value: "Open tasks are".
        plain = without_quotes(sentence)  # same length, quotes blanked
        first_quote = next((i for i, (a, b) in enumerate(zip(sentence, plain, strict=True)) if a != b), len(plain))
        named = {p.lower() for p in mentioned}
        first_prop = next((m.start() for m in _IDENTIFIER.finditer(plain) if m.group(0).lower() in named), len(plain))
        cut = min(first_quote, first_prop)
        term = {
            s for s in stems(plain[:cut]) if s not in _DEFINITION_GLUE and s not in nouns and not action_of(s)
        }
        if term:
            found.append(Definition(frozenset(term), {prop: values if wants_list else values[0]}))
    return found


# Analyses of the tool lists seen lately. A person's tools are the same from one call to the next, and
# analysing them again was a third of what the offline model costs per turn.
_ANALYSED: dict[str, list[ToolInfo]] = {}
_ANALYSED_MAX = 64


def analyse_tools(tools: Sequence[ToolSpec]) -> list[ToolInfo]:
    """ToolInfo for each tool; nouns shared by every tool name (an app prefix) are dropped."""
    # Keyed by everything the analysis (and the model after it) reads of a tool: a ToolInfo made from an
    # earlier call's tool object says the same as one made from this call's.
    key = json.dumps([[tool.name, tool.description, tool.parameters] for tool in tools], sort_keys=True, default=str)
    analysed = _ANALYSED.get(key)
    if analysed is None:
        analysed = _analyse_tools(tools)
        if len(_ANALYSED) >= _ANALYSED_MAX:
            _ANALYSED.pop(next(iter(_ANALYSED)))
        _ANALYSED[key] = analysed
    return list(analysed)  # the caller may reorder its list; the cached one stays as it was


def _analyse_tools(tools: Sequence[ToolSpec]) -> list[ToolInfo]:
    name_stems = [[stem(w) for w in words(t.name)] for t in tools]
    shared: set[str] = set.intersection(*(set(s) for s in name_stems)) if len(tools) > 1 else set()
    # The shared stems are dropped in the order the names spell them (the app's prefix first), only while
    # every tool keeps a noun: with `app_project_create` and `app_project_archive` alone, `project` stays
    # the noun of both, not of the one whose name has nothing else but its verb.
    common: set[str] = set()
    for shared_stem in (s for s in dict.fromkeys(name_stems[0]) if s in shared) if shared else ():
        if any(all(s in common | {shared_stem} or action_of(s) for s in stems_) for stems_ in name_stems):
            break
        common.add(shared_stem)
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
    # The same field usually means the same thing across one app's tools: a read tool's `status` filter
    # can borrow the labels the update tool's form gives the values.
    every_label: dict[str, dict[str, str]] = {}
    own_labels = [_labels_of(tool) for tool in tools]
    for labels in own_labels:
        for prop, values in labels.items():
            for value, label in values.items():
                every_label.setdefault(prop, {}).setdefault(value, label)
    # The kinds plain lists name: the last noun of each read tool that has a search of its own (a list of
    # records, where `project_stats` is a read about one).
    listed = frozenset(
        nouns[-1]
        for tool, nouns, stems_ in zip(tools, raw_nouns, name_stems, strict=True)
        if nouns and _tool_action(tool, stems_) == "list"
        and any(p.lower() in SEARCH_FIELD_NAMES for p in (tool.parameters or {}).get("properties") or {})
    ) or frozenset(read_nouns)
    return [
        _analyse(tool, stems_, nouns, read_nouns, _merge(own, every_label), listed)
        for tool, stems_, nouns, own in zip(tools, name_stems, raw_nouns, own_labels, strict=True)
    ]


def _merge(first: Mapping[str, Mapping[str, str]], rest: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    merged = {prop: dict(values) for prop, values in rest.items()}
    for prop, values in first.items():
        merged.setdefault(prop, {}).update(values)
    return merged


def _tool_action(tool: ToolSpec, name_stems: list[str]) -> str | None:
    for s in reversed(name_stems):  # `task_list` and `list_tasks` both name the action
        if action := action_of(s):
            return action
    return _first_action(tool.description)


def _analyse(
    tool: ToolSpec,
    name_stems: list[str],
    nouns: tuple[str, ...],
    read_nouns: set[str],
    labels: Mapping[str, Mapping[str, str]],
    listed: frozenset[str] = frozenset(),
) -> ToolInfo:
    parameters = tool.parameters or {}
    properties: dict[str, Mapping[str, Any]] = dict(parameters.get("properties") or {})
    required = tuple(parameters.get("required") or ())
    action = _tool_action(tool, name_stems)
    verb = _own_verb(tool, nouns, read_nouns) if action is None else None
    if verb is not None:
        nouns = tuple(noun for noun in nouns if noun != verb) or nouns
    # The record the tool is about: the last of its nouns that a plain list names (`project` in
    # `project_stats`, listed by `project_list`), else its last noun.
    primary = next((noun for noun in reversed(nouns) if noun in listed), nouns[-1] if nouns else None)
    references = []
    for prop, schema in properties.items():
        noun = _reference_noun(prop, schema, primary, read_nouns)
        if noun is not None:
            by_name = "string" in types_of(schema) and "name" in words(str(schema.get("description", "")))
            references.append(
                Reference(
                    prop,
                    noun,
                    own=(noun == primary and action != "create"),
                    choices=_choices(schema),
                    by_name=by_name,
                )
            )
    referenced = {r.prop for r in references}
    text_candidates = [
        p
        for p, s in properties.items()
        if types_of(s) <= {"string"} and not s.get("enum") and not s.get("format") and p not in referenced
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
        definitions=tuple(_definitions(tool.description, properties, nouns)),
        labels=labels,
        verb=verb,
        subject=primary,
        flags=_flags(tool.description, properties),
    )


def _own_verb(tool: ToolSpec, nouns: tuple[str, ...], read_nouns: set[str]) -> str | None:
    """The tool's verb when its description starts with one of its name's words that no read lists."""
    first = next(iter(words(tool.description)), "")
    verb = stem(first)
    if verb and verb in nouns and verb not in read_nouns and len(nouns) > 1:
        return verb
    return None


def _flags(description: str, properties: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, bool]]:
    """Words that set each boolean property: its own name ("archived") sets it; "un" + it clears it;
    a description's "bring it back (archived=false)" names the word for the other way ("bring")."""
    found: dict[str, dict[str, bool]] = {}
    for prop, schema in properties.items():
        if types_of(schema) != {"boolean"} or "__" in prop:
            continue
        own = stem(words(prop)[-1]) if words(prop) else ""
        if own:
            found[prop] = {own: True, "un" + own: False}
    for phrase, prop, value in _FLAG.findall(description):
        if prop not in found:
            continue
        content = [w for w in words(phrase) if w not in _FLAG_GLUE]
        if content:
            found[prop].setdefault(stem(content[0]), value.lower() == "true")
    return found


def _reference_noun(prop: str, schema: Mapping[str, Any], primary: str | None, read_nouns: set[str]) -> str | None:
    """Which kind of record this argument identifies, or None when it is not an id."""
    lowered = prop.lower()
    kinds = types_of(schema)
    if kinds - {"integer", "string"} or schema.get("enum") or schema.get("format"):
        return None
    if "__" in lowered:
        return None  # `id__gte`, `project__in`: a filter's lookup compares or spans, it holds no one record
    description_words = words(str(schema.get("description", "")))
    if lowered in ("id", "pk", "object_id"):
        # "Id of the task to comment on.": the description says whose id, which need not be the tool's noun.
        named = next((stem(w) for w in description_words if stem(w) in read_nouns), None)
        return named or primary
    for suffix in ("_id", "_pk"):
        if lowered.endswith(suffix) and len(lowered) > len(suffix):
            return stem(lowered[: -len(suffix)])
    if prop.endswith("Id") and len(prop) > 2:  # camelCase: taskId
        return stem(prop[:-2])
    description = set(description_words)
    if "integer" in kinds and stem(lowered) in read_nouns:
        return stem(lowered)
    if "integer" in kinds and ("id" in description or {"primary", "key"} <= description):
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
