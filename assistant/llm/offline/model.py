"""The offline demo model: a deterministic planner over the tools it is given.

Each call re-reads the conversation since the last user message and works out, from scratch, the
next step of a small plan: look up the ids of records the user named (with a read tool), then
call the tool that matches the request, then reply about what its result says. Because the plan
is recomputed from the messages, the model keeps no state and any worker can continue a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from ..types import Message, ModelResponse, TextDeltaCallback, ToolCall, ToolSpec, Usage
from .capabilities import asks_what_i_can_do, capabilities, purpose
from .fields import field_values
from .files import AttachedFile, describe_files, file_arguments, needs_a_file, split_files, usable
from .followup import answered_request, relayed_task
from .greetings import greeting_reply, is_greeting
from .lookups import Lookup, find_call, lookup_arguments, reader_for, resolve
from .page import Page, asks_about, describe_page, named, person_and_page, pointed_kind, points
from .replies import beyond, missing_reply, result_reply, which_of
from .results import plural, read_outcome
from .roster import introduce
from .schema import Reference, ToolInfo, analyse_tools
from .society import PLAN_TOOL, delegate, is_delegation, kinds_of, seat_of, split_request
from .text import ACTION_STEMS, Name, Request, action_of, filled, read_request, stem, words

MODEL_NAME = "offline-demo"
MIN_SCORE = 2.0
_INTRO = "Here is what I can do for you:"


@dataclass
class Step:
    """The next thing to do for one request: calls to make, a wait for their results, or what to say."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    waiting: bool = False
    ok: bool = True  # False when it ended without doing what was asked (a refusal, a question, a failure)


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
        last_user, page = person_and_page(messages)
        if last_user is None:
            return "Hello! Ask me to do something in this app, or ask what I can do.", []
        # The person's words, and the files attached to them: a tool that needs a file is one only with a file.
        words, files = split_files(messages[last_user].content)
        if files:
            messages = [*messages[:last_user], Message.user(words), *messages[last_user + 1:]]
        today = timezone.localdate()
        turn = messages[last_user + 1 :]
        results = {m.tool_call_id: m.content for m in turn if m.role == "tool"}
        made = [call for m in turn if m.role == "assistant" for call in m.tool_calls]
        next_id = sum(len(m.tool_calls) for m in messages) + 1
        # A spec that may ask members hands them what its own tools do not cover (see society.py).
        own = usable([tool for tool in tools if not is_delegation(tool) and tool.name != PLAN_TOOL], files)
        infos = analyse_tools(own)
        # "make tasks from this CSV": the tool is one that takes the file the person gave (the others still look
        # up what it names).
        takes_file = [info for info in infos if needs_a_file(info.spec)] if _means_the_files(words, files) else []
        asks_members = any(is_delegation(tool) for tool in tools)
        text = messages[last_user].content
        if is_greeting(text):
            # For the assistant itself, even right after it asked for a value: "hi" answers no "What title?".
            members = [seat_of(tool).name for tool in tools if is_delegation(tool)] if not own else []
            return greeting_reply(text, members=members, has_tools=bool(infos)), []
        # "what is in this file?": what the files hold, told from the block the person's message carries.
        if _asks_about_the_files(words, files):
            return describe_files(files), []
        # "5" after "Which book (its id)?": the request asked about, with the value (see followup.py).
        if asks_members and not own:
            # A member's question came as the reply itself (a handoff) or inside a relayed one: the answer
            # completes the request it was asked about.
            text = relayed_task(messages, last_user) or answered_request(messages, last_user, None)
        elif not asks_what_i_can_do(text):
            text = answered_request(messages, last_user, lambda earlier, joined: _better(earlier, joined, infos, page))
        request = read_request(text, today=today)
        # What is about the assistant itself is answered by whoever is asked: no member needs asking for it.
        if asks_what_i_can_do(text):
            if asks_members and not own:
                return introduce(tools), []
            return capabilities(infos, _understood(infos), page=page, intro=_INTRO), []
        # What the page shows is answered from what it sent, by whoever is asked (no member needs asking).
        if page is not None and asks_about(text) and _means_page(text, page):
            return describe_page(page), []
        # The kinds of record the tools and members name: how "a project P with the tasks 'a' and 'b'" splits.
        kinds = kinds_of(tools) | {noun for info in infos for noun in info.nouns}
        if asks_members and (len(split_request(text, kinds)) > 1 or _choose_tool(request, infos, page) is None):
            # A member sees no page: the task it is handed names the page's record instead of pointing at it.
            handed = named(text, page) if page is not None and points(text) else text
            delegated = delegate(handed, made, results, tools, next_id)
            if delegated is not None:
                return delegated

        parts = split_request(text, kinds)
        if len(parts) > 1:
            requests = [read_request(part, today=today) for part in parts]
            unfit = [part for part, asked in zip(parts, requests, strict=True)
                     if _choose_tool(asked, infos, page) is None]
            if unfit:
                return beyond(unfit[0], infos, page, _understood(infos), part_of=text), []
            said: list[str] = []
            for part, asked in zip(parts, requests, strict=True):
                step = _step(asked, infos, page, made, results, next_id, files, takes_file)
                if step.calls or step.waiting:
                    return "", step.calls
                said.append(step.text)
                if not step.ok:
                    left = len(parts) - len(said)
                    if left:
                        said.append(f"I stopped there: nothing after “{part.rstrip('.')}” was tried.")
                    break
            return "\n\n".join(said), []
        step = _step(request, infos, page, made, results, next_id, files, takes_file)
        return step.text, step.calls

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


def _step(
    request: Request,
    infos: list[ToolInfo],
    page: Page | None,
    made: list[ToolCall],
    results: dict[str | None, str],
    next_id: int,
    files: Sequence[AttachedFile] = (),
    choose_from: Sequence[ToolInfo] = (),
) -> Step:
    """The next step of one request: look up the ids of records it names, call the tool, say what came of it. The
    tool is one of `choose_from` when given (else of `infos`); one that takes a file gets the first file the person
    attached."""
    target = _choose_tool(request, list(choose_from), page) if choose_from else None
    target = target or _choose_tool(request, infos, page)
    if target is None:
        tied = _tied(request, infos, page)
        if len(tied) > 1:
            return Step(which_of(tied, infos, page, _understood(infos)), ok=False)
        return Step(beyond(request.text, infos, page, _understood(infos)), ok=False)
    plan = _plan(request, target, infos, page)
    if plan.problem:
        return Step(plan.problem, ok=False)
    for prop in file_arguments(target.spec) if files else ():
        plan.arguments.setdefault(prop, files[0].id)
        if prop in plan.missing:
            plan.missing.remove(prop)
    for lookup in plan.lookups:
        previous = find_call(made, lookup.tool.name, lookup.arguments)
        if previous is None:
            return Step(calls=[ToolCall(f"call_offline_{next_id}", lookup.tool.name, lookup.arguments)])
        if previous.id not in results:
            return Step(waiting=True)  # the loop has not answered the call yet; nothing new to say
        resolved, problem = resolve(lookup, results[previous.id])
        if problem:
            return Step(problem, ok=False)
        plan.arguments[lookup.prop] = resolved
    if plan.missing:
        return Step(missing_reply(target, plan.missing, infos, page, _understood(infos)), ok=False)
    previous = find_call(made, target.name, plan.arguments)
    if previous is None:
        return Step(calls=[ToolCall(f"call_offline_{next_id}", target.name, plan.arguments)])
    if previous.id not in results:
        return Step(waiting=True)
    shown = {**plan.arguments, **{lookup.prop: lookup.name for lookup in plan.lookups}}
    content = results[previous.id]
    ok = read_outcome(content).kind in ("done", "rows")
    return Step(result_reply(target, shown, content, plan.qualifiers), ok=ok)


_FILE_WORDS = re.compile(r"\b(this|these|it|them|file|files|csv|attached|attachment|upload(ed)?)\b", re.IGNORECASE)


def _means_the_files(words: str, files: Sequence[AttachedFile]) -> bool:
    """Whether the request is about the files attached to it ("from this CSV", "attached", or a file's name)."""
    if not files:
        return False
    return bool(_FILE_WORDS.search(words)) or any(file.name and file.name.lower() in words.lower() for file in files)


_ABOUT_FILES = re.compile(
    r"\b(what('?s| is| are)? in|what do(es)? .{0,40}\b(say|contain|hold)|describe|summari[sz]e|read (it|this|them|the)"
    r"|look at|tell me about|show me|how many (rows|lines))\b", re.IGNORECASE)


def _asks_about_the_files(words: str, files: Sequence[AttachedFile]) -> bool:
    """Whether the person asks what their files hold ("what is in this file?", "summarise the CSV")."""
    return _means_the_files(words, files) and bool(_ABOUT_FILES.search(words))


def _understood(infos: list[ToolInfo]) -> Any:
    """Whether the model maps a request to a tool with nothing missing: how examples are checked."""
    today = timezone.localdate()

    def check(text: str, info: ToolInfo, page: Page | None) -> bool:
        request = read_request(filled(text), today=today)  # as the person sends it, values for placeholders
        if _choose_tool(request, infos, page) is not info:
            return False
        plan = _plan(request, info, infos, page)
        return not plan.problem and not plan.missing

    return check


def _better(earlier: str, joined: str, infos: list[ToolInfo], page: Page | None) -> bool:
    """Whether `joined` is the request `earlier` for the same tool with more of it known: a missing value
    given, or a record given by its id that had to be looked up."""
    today = timezone.localdate()
    before, after = read_request(earlier, today=today), read_request(joined, today=today)
    target = _choose_tool(before, infos, page)
    if target is None or _choose_tool(after, infos, page) is not target:
        return False
    was, now = _plan(before, target, infos, page), _plan(after, target, infos, page)
    return not now.problem and (len(now.missing) < len(was.missing) or len(now.lookups) < len(was.lookups))


def _tied(request: Request, infos: list[ToolInfo], page: Page | None) -> list[ToolInfo]:
    """The tools that fit a request equally by its action alone ("delete this" with no page open)."""
    pointed = _pointed_page(request, page)
    scored = [(_score(request, info, pointed), info) for info in infos]
    best = max((score for score, _ in scored), default=0.0)
    if best < MIN_SCORE:
        return []
    tied = [info for score, info in scored if score == best]
    return tied if all(_only_action(request, info) for info in tied) else []


def _means_page(text: str, page: Page) -> bool:
    kind = pointed_kind(text)
    return kind is None or kind in page.kind_stems


def _score(request: Request, info: ToolInfo, page: Page | None = None) -> float:
    """How well the tool fits; `page` is the record the request points at ("archive this"), if any."""
    score = 0.0
    if info.action and info.action in request.actions:
        score += 3
    if info.verb and info.verb in request.stems:
        score += 3  # the tool's own verb ("archive")
    if not info.is_read and any(word in request.stems for words_ in info.flags.values() for word in words_):
        score += 2  # "unarchive", "bring it back": a word the description says sets the tool's flag
    score += 2 * len(request.stems & set(info.nouns))
    score += len(request.stems & set(info.enum_values()))
    counted = set(info.nouns) | info.name_stems
    score += 0.5 * len((request.stems & info.description_stems) - counted)
    # A hint, weaker than a word the person wrote: the page's kind is what "this" is.
    if page is not None and (
        page.is_kind(info.primary_noun) or any(not r.own and page.is_kind(r.noun) for r in info.references)
    ):
        score += 1
    return score


def _only_action(request: Request, info: ToolInfo) -> bool:
    """Whether the tool fits by the action alone: no noun, verb, value or flag of it was named."""
    named = set(info.nouns) | set(info.enum_values()) | {info.verb} | info.description_stems
    return not (request.stems & named - ACTION_STEMS)


def _pointed_page(request: Request, page: Page | None) -> Page | None:
    """The page, when the request points at it ("this", "here", "it", "this project" on a project's page)."""
    if page is None or not points(request.text):
        return None
    kind = pointed_kind(request.text)
    return page if kind is None or kind in page.kind_stems or action_of(kind) else None


def _choose_tool(request: Request, infos: list[ToolInfo], page: Page | None = None) -> ToolInfo | None:
    pointed = _pointed_page(request, page)
    scored = [(_score(request, info, pointed), info.is_read, -index, info) for index, info in enumerate(infos)]
    if not scored:
        return None
    score, _, _, best = max(scored, key=lambda item: item[:3])
    if score < MIN_SCORE:
        return None
    if _only_action(request, best) and sum(1 for item in scored if item[0] == score) > 1:
        return None  # "delete this" with no page, "what is this?": several tools fit as well; guess none
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


def _plan(request: Request, target: ToolInfo, infos: list[ToolInfo], page: Page | None = None) -> Plan:
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
    _apply_flags(request, target, arguments)
    qualifiers = _apply_definitions(request, target, arguments)
    # "by Frank Herbert", "author 'X'", "with estimate hours 3": fields named in the request.
    referenced = {reference.prop for reference in target.references}
    for found in field_values(request.text, target, skip=referenced | set(arguments)):
        arguments.setdefault(found.prop, found.value)
        used.update(name for name in request.names if found.start <= name.start < found.end)
    pointed = _pointed_page(request, page)

    lookups: list[Lookup] = []
    for reference in target.references:
        if pointed is not None and pointed.is_kind(reference.noun) and not _names_one(request, reference, used):
            arguments[reference.prop] = pointed.id  # "archive this", "add a task here": the page's record
            continue
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
        reader = reader_for(reference.noun, infos)
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
        lookups.append(Lookup(reference.prop, reference.noun, name.text, reader, lookup_arguments(reader, name.text)))

    if pointed is not None and not any(pointed.is_kind(r.noun) for r in target.references):
        own = next((r for r in target.references if r.own and r.prop not in arguments), None)
        if own is not None and not any(lookup.prop == own.prop for lookup in lookups):
            return Plan(target, arguments, [], [], problem=(
                f"I can't do that with {pointed.name()}: “{purpose(target)}” works on a {own.noun}, and this "
                f"page shows a {pointed.kind}."
            ))
    free = [name for name in request.names if name not in used]
    leftover = [name for name in free if name.quoted]
    if target.action == "create" and not leftover:
        # "add a book Dune": the capitalised name right after the tool's own noun is the new record's.
        leftover = [name for name in free if name.noun == target.primary_noun and name.preposition is None]
    if target.text_field and leftover and target.text_field not in arguments:
        arguments[target.text_field] = leftover[0].text
        used.add(leftover[0])
    elif target.is_read and target.search_field and target.search_field not in arguments:
        searched = leftover or [name for name in free if name.preposition is None]
        if searched:
            arguments[target.search_field] = searched[0].text
    looked_up = {lookup.prop for lookup in lookups}
    missing = [prop for prop in target.required if prop not in arguments and prop not in looked_up]
    if target.action == "update" and target.text_field and not set(arguments) - referenced - looked_up:
        missing.append(target.text_field)  # "rename this project": nothing to change yet, so ask for the new name
    return Plan(target, arguments, lookups, missing, qualifiers=qualifiers)


def _names_one(request: Request, reference: Reference, used: set[Name]) -> bool:
    """Whether the request names a record for this argument itself (a number or a name of its kind)."""
    if any(noun == reference.noun for noun, _ in request.numbers):
        return True
    return any(name.noun == reference.noun for name in request.names if name not in used)


def _apply_flags(request: Request, target: ToolInfo, arguments: dict[str, Any]) -> None:
    """Booleans the request's words set ("archive" -> archived=true, "unarchive" -> false)."""
    for prop, setters in target.flags.items():
        said = [value for word, value in setters.items() if word in request.stems]
        if said:
            # A word that clears the flag wins: "bring it back" may come with the flag's own word.
            arguments.setdefault(prop, all(said))


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


_ONTO = frozenset({"to", "onto", "on"})


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
        if bare:
            return bare[0]
        if len(target.references) == 1 and file_arguments(target.spec):
            # "attach this to “Fix the fence”": a tool that takes a file onto one record, named after "to".
            onto = [name for name in free if name.quoted and name.preposition in _ONTO]
            return onto[0] if onto else None
        return None
    # A related record: "in Home", "to 'Work'". A write's optional one only when named by its kind: in
    # "change the task 'A' to 'B'", 'B' is the new title, not an assignee.
    if not target.is_read and reference.prop not in target.required:
        return None
    placed = [name for name in free if name.preposition is not None and name.noun is None]
    return placed[0] if placed else None
