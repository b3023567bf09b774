"""The offline demo model: a deterministic planner over the tools it is given.

Each call re-reads the conversation since the last user message and works out, from scratch, the
next step of a small plan: look up the ids of records the user named (with a read tool), then
call the tool that matches the request, then reply about what its result says. Because the plan
is recomputed from the messages, the model keeps no state and any worker can continue a run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from ..types import Message, ModelResponse, TextDeltaCallback, ToolCall, ToolSpec, Usage
from .results import MAX_ROWS_SHOWN, describe_row, match_rows, plural, read_outcome, row_id
from .schema import Reference, ToolInfo, analyse_tools
from .society import PLAN_TOOL, delegate, is_delegation, split_request
from .text import Name, Request, action_of, read_request, stem, words

MODEL_NAME = "offline-demo"
MIN_SCORE = 2.0


@dataclass(frozen=True)
class Lookup:
    """Find the id of the `noun` called `name` with the read tool `tool`, for argument `prop`."""

    prop: str
    noun: str
    name: str
    tool: ToolInfo
    arguments: dict[str, Any]


@dataclass
class Plan:
    target: ToolInfo
    arguments: dict[str, Any]
    lookups: list[Lookup]
    missing: list[str]
    problem: str = ""
    qualifiers: list[str] = field(default_factory=list)  # the user's words a description defined ("open")


class OfflineModel:
    """`offline`: no network, no weights; labelled `offline-demo` so the UI can say it is a demo."""

    name = "offline"
    is_demo = True

    def call_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_text_delta: TextDeltaCallback | None = None,
    ) -> ModelResponse:
        """The next step for the latest user message: a tool call, or the reply."""
        text, calls = self._decide(list(messages), list(tools))
        return self._respond(messages, tools, text, calls, on_text_delta)

    def complete(self, messages: Sequence[Message], *, on_text_delta: TextDeltaCallback | None = None) -> ModelResponse:
        """An extractive summary of the conversation (what the loop asks for when compacting): its last
        exchanges, one line each, labelled by who said them.

        The turn sends the messages to fold as one transcript of labelled lines ("User: …", "Assistant: …",
        after "Earlier summary: …"); those labels are kept as they are, a line without one continues the
        line before, and a message that is no transcript is labelled by its own role."""
        heading, nothing = "Summary of the earlier conversation:", "Nothing to summarise."
        said: list[list[str]] = []  # [who, what they said]
        for message in messages:
            if message.role not in ("user", "assistant"):
                continue
            own = "User" if message.role == "user" else "Assistant"
            first = True
            for raw in message.content.splitlines():
                line = " ".join(raw.split()).removeprefix("Earlier summary: ")
                if not line or line in (heading, nothing):
                    continue
                who, _, what = line.partition(": ")
                if who in ("User", "Assistant") and what:
                    said.append([who, what])
                elif first or not said:
                    said.append([own, line])
                else:
                    said[-1][1] += " " + line
                first = False
        text = f"{heading}\n" + "\n".join(f"{who}: {what[:160]}" for who, what in said[-12:]) if said else nothing
        return self._respond(messages, (), text, [], on_text_delta)

    # Deciding.

    def _decide(self, messages: list[Message], tools: list[ToolSpec]) -> tuple[str, list[ToolCall]]:
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None:
            return "Hello! Ask me to do something in this app.", []
        request = read_request(messages[last_user].content, today=timezone.localdate())
        turn = messages[last_user + 1 :]
        results = {m.tool_call_id: m.content for m in turn if m.role == "tool"}
        made = [call for m in turn if m.role == "assistant" for call in m.tool_calls]
        next_id = sum(len(m.tool_calls) for m in messages) + 1
        # A spec that may ask members hands them what its own tools do not cover (see society.py).
        own = [tool for tool in tools if not is_delegation(tool) and tool.name != PLAN_TOOL]
        infos = analyse_tools(own)
        if any(is_delegation(tool) for tool in tools) and (len(split_request(messages[last_user].content)) > 1
                                      or _choose_tool(request, infos) is None):
            delegated = delegate(messages[last_user].content, made, results, tools, next_id)
            if delegated is not None:
                return delegated

        target = _choose_tool(request, infos)
        if target is None:
            return _capabilities(infos), []
        plan = _plan(request, target, infos)
        if plan.problem:
            return plan.problem, []
        for lookup in plan.lookups:
            previous = _find_call(made, lookup.tool.name, lookup.arguments)
            if previous is None:
                return "", [ToolCall(f"call_offline_{next_id}", lookup.tool.name, lookup.arguments)]
            if previous.id not in results:
                return "", []  # the loop has not answered the call yet; nothing new to say
            resolved, problem = _resolve(lookup, results[previous.id])
            if problem:
                return problem, []
            plan.arguments[lookup.prop] = resolved
        if plan.missing:
            return _missing_reply(plan), []
        previous = _find_call(made, target.name, plan.arguments)
        if previous is None:
            return "", [ToolCall(f"call_offline_{next_id}", target.name, plan.arguments)]
        if previous.id not in results:
            return "", []
        shown = {**plan.arguments, **{lookup.prop: lookup.name for lookup in plan.lookups}}
        return _reply(target, shown, results[previous.id], plan.qualifiers), []

    def _respond(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        text: str,
        calls: list[ToolCall],
        on_text_delta: TextDeltaCallback | None,
    ) -> ModelResponse:
        if on_text_delta is not None and text:
            # Word by word, so the demo exercises the same streaming path as a real model.
            for index, piece in enumerate(text.split(" ")):
                on_text_delta(piece if index == 0 else " " + piece)
        prompt_chars = sum(len(m.content) for m in messages) + sum(
            len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools
        )
        completion_chars = len(text) + sum(len(c.name) + len(json.dumps(c.arguments)) for c in calls)
        return ModelResponse(
            text=text,
            tool_calls=tuple(calls),
            # Roughly four characters a token, so run budgets behave as they would with a real model.
            usage=Usage(prompt_chars // 4 + 1, completion_chars // 4 + 1),
            model=MODEL_NAME,
            provider="offline",
            is_demo=True,
        )


def _score(request: Request, info: ToolInfo) -> float:
    score = 0.0
    if info.action and info.action in request.actions:
        score += 3
    score += 2 * len(request.stems & set(info.nouns))
    score += len(request.stems & set(info.enum_values()))
    counted = set(info.nouns) | info.name_stems
    score += 0.5 * len((request.stems & info.description_stems) - counted)
    return score


def _choose_tool(request: Request, infos: list[ToolInfo]) -> ToolInfo | None:
    scored = [(_score(request, info), info.is_read, -index, info) for index, info in enumerate(infos)]
    if not scored:
        return None
    score, _, _, best = max(scored, key=lambda item: item[:3])
    if score < MIN_SCORE:
        return None
    writes = request.actions - {"list"}
    if writes and best.action not in writes:
        if best.is_read and "list" in request.actions and _only_values(request, best, writes):
            return best  # "which tasks are done?": the verb-like word is a value the read filters on
        return None  # asked to change something no tool changes: say so rather than just read
    return best


def _only_values(request: Request, read: ToolInfo, writes: frozenset[str] | set[str]) -> bool:
    """Whether every word asking for a write is a value the read tool can filter on instead."""
    triggers = {s for s in request.stems if action_of(s) in writes}
    return bool(triggers) and triggers <= set(read.enum_values())


def _plan(request: Request, target: ToolInfo, infos: list[ToolInfo]) -> Plan:
    arguments: dict[str, Any] = {}
    used: set[Name] = set()
    enums = target.enum_values()
    for word in sorted(request.stems):
        if word in enums:
            prop, value = enums[word]
            arguments.setdefault(prop, value)
    dates = target.date_fields()
    if request.date is not None and dates:
        arguments[dates[0]] = request.date.isoformat()
    qualifiers = _apply_definitions(request, target, arguments)

    lookups: list[Lookup] = []
    for reference in target.references:
        if target.is_read and reference.own and target.search_field:
            continue  # a read finds its own records by name through its search; no id lookup first
        number = next((value for noun, value in request.numbers if noun == reference.noun), None)
        if number is not None:
            arguments[reference.prop] = number
            continue
        name = _name_for(reference, request, target, used)
        if name is None:
            continue
        used.add(name)
        if name.text.casefold() in reference.choices:
            arguments[reference.prop] = reference.choices[name.text.casefold()]
            continue
        if reference.by_name:
            # The tool looks the name up itself, within what the user may see; a lookup would only add a step.
            arguments[reference.prop] = name.text
            continue
        reader = _reader_for(reference.noun, infos)
        if reader is None:
            return Plan(
                target,
                arguments,
                [],
                [],
                problem=(
                    f"I would need the id of the {reference.noun} “{name.text}”, and none of my tools lists "
                    f"{plural(reference.noun, 2)}."
                ),
            )
        lookups.append(Lookup(reference.prop, reference.noun, name.text, reader, _lookup_arguments(reader, name.text)))

    leftover = [name for name in request.names if name not in used and name.quoted]
    if target.text_field and leftover:
        arguments[target.text_field] = leftover[0].text
        used.add(leftover[0])
    elif target.is_read and target.search_field and leftover:
        arguments[target.search_field] = leftover[0].text
    looked_up = {lookup.prop for lookup in lookups}
    missing = [prop for prop in target.required if prop not in arguments and prop not in looked_up]
    return Plan(target, arguments, lookups, missing, qualifiers=qualifiers)


def _apply_definitions(request: Request, target: ToolInfo, arguments: dict[str, Any]) -> list[str]:
    """Fill arguments for words the tool's description defines ("open" tasks); returns those words.

    Only words nothing else explains count: not verbs, not the tool's nouns, not argument names and
    not values the schema already lists (those were filled from the enum above).
    """
    explained = set(target.nouns) | set(target.enum_values()) | {stem(p) for p in target.properties}
    unexplained = {s for s in request.stems if s not in explained and action_of(s) is None}
    used: list[str] = []
    for definition in target.definitions:
        hits = unexplained & definition.stems
        if not hits or any(prop in arguments for prop in definition.arguments):
            continue
        arguments.update(definition.arguments)
        # The user's own spelling, for the reply ("3 open tasks").
        used += [w for w in dict.fromkeys(words(request.text)) if stem(w) in hits]
    return used


def _name_for(reference: Reference, request: Request, target: ToolInfo, used: set[Name]) -> Name | None:
    free = [name for name in request.names if name not in used]
    for name in free:
        if name.noun == reference.noun:
            return name
    if reference.own:
        # The record the tool acts on: a quoted name when the tool has no text of its own to fill.
        quoted = [name for name in free if name.quoted and name.preposition is None]
        if quoted and not target.text_field:
            return quoted[0]
        bare = [name for name in free if not name.quoted and name.preposition is None and name.noun is None]
        return bare[0] if bare else None
    # A related record: "in Home", "to 'Work'".
    placed = [name for name in free if name.preposition is not None and name.noun is None]
    return placed[0] if placed else None


def _reader_for(noun: str, infos: list[ToolInfo]) -> ToolInfo | None:
    readers = [info for info in infos if info.is_read and noun in info.nouns]
    # The most specific reader: `project_list` rather than `project_member_list`.
    return min(readers, key=lambda info: len(info.nouns)) if readers else None


def _lookup_arguments(reader: ToolInfo, name: str) -> dict[str, Any]:
    if reader.search_field:
        return {reader.search_field: name}
    for prop in ("name", "title", "label"):
        if prop in reader.properties:
            return {prop: name}
    return {}


def _find_call(made: list[ToolCall], name: str, arguments: dict[str, Any]) -> ToolCall | None:
    return next((call for call in made if call.name == name and call.arguments == arguments), None)


def _resolve(lookup: Lookup, content: str) -> tuple[Any, str]:
    outcome = read_outcome(content)
    if outcome.kind in ("denied", "failed", "invalid", "declined"):
        detail = f" ({outcome.message})" if outcome.message else ""
        return None, f"I couldn't look up the {lookup.noun} “{lookup.name}”{detail}."
    matches = match_rows(outcome.rows, lookup.name)
    if not matches:
        return None, f"I couldn't find a {lookup.noun} called “{lookup.name}”. Nothing was changed."
    ids = sorted({str(row_id(row)) for row in matches})
    if len(ids) > 1:
        listing = "; ".join(describe_row(row, lookup.tool.labels, with_id=True) for row in matches[:5])
        return None, (
            f"More than one {lookup.noun} matches “{lookup.name}”: {listing}. "
            f"Which one? You can give its number, e.g. {lookup.noun} {ids[0]}."
        )
    return row_id(matches[0]), ""


def _missing_reply(plan: Plan) -> str:
    target = plan.target
    needs = ", ".join(plan.missing)
    hint = " Put names in quotes, e.g. 'Buy milk'." if target.text_field in plan.missing else ""
    return f"To {_purpose(target)} I need: {needs}.{hint}"


def _purpose(info: ToolInfo) -> str:
    sentence = info.spec.description.strip().split(". ")[0].rstrip(".")
    return (sentence[:1].lower() + sentence[1:]) if sentence else info.name


def _reply(target: ToolInfo, arguments: dict[str, Any], content: str, qualifiers: Sequence[str] = ()) -> str:
    outcome = read_outcome(content)
    noun = target.primary_noun
    if outcome.kind == "rows" or (target.is_read and outcome.kind == "done"):
        rows = outcome.rows
        what = " ".join([*qualifiers, plural(noun, 2 if len(rows) != 1 else 1)])
        if not rows:
            return f"No {what} matched." + (f" {outcome.message}" if outcome.message else "")
        shown = "\n".join(f"- {describe_row(row, target.labels)}" for row in rows[:MAX_ROWS_SHOWN])
        hidden = len(rows) - MAX_ROWS_SHOWN
        more = f"\n…and {hidden} more." if hidden > 0 else ""
        if outcome.more:
            more += "\nThere are more than these; narrow it down (a name in quotes, a status, a project)."
        return f"Found {len(rows)} {what}:\n{shown}{more}"
    if outcome.kind == "done":
        if outcome.message:
            return f"Done: {outcome.message}"  # the app's own words about what it did
        what = ", ".join(f"{k}: {v}" for k, v in arguments.items())
        return f"Done: {_purpose(target)}" + (f" ({what})." if what else ".")
    detail = f" ({outcome.explanation})" if outcome.explanation else ""
    if outcome.kind == "pending":
        return f"This needs your confirmation before I {_purpose(target)}."
    if outcome.kind == "declined":
        # Whatever the loop told the model about the refusal is an instruction to it, not news for the person.
        return "You declined, so nothing was changed."
    if outcome.kind == "denied":
        return f"You are not allowed to {_purpose(target)}{detail}; nothing was changed."
    if outcome.kind == "not_found":
        return f"That {noun or 'record'} was not found{detail}; nothing was changed."
    if outcome.kind == "unknown":
        return (
            f"I can't tell whether that took effect: the work on it stopped before it finished. "
            f"Check the current state before asking me to {_purpose(target)} again."
        )
    if outcome.kind == "invalid":
        if outcome.errors:
            errors = "\n".join(f"- {error}" for error in outcome.errors)
            message = f" {outcome.message}" if outcome.message else ""
            return f"The app did not accept that:{message}\n{errors}"
        return f"The app did not accept that{detail}."
    return f"That did not work{detail or ': the tool reported an error'}."


def _capabilities(infos: list[ToolInfo]) -> str:
    if not infos:
        return "I'm the offline demo model and no tools are available to me here, so I can only chat."
    lines = "\n".join(f"- {info.name}: {_purpose(info)}" for info in infos)
    return (
        "I couldn't match that to one of my tools: I'm the offline demo model, so I only understand short "
        "requests that say what to do and to what, with names in quotes. I can:\n" + lines
    )
