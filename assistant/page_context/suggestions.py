"""A few things the assistant can do for this person, here: what the panel offers in an empty chat and
on a page.

They come only from tools the person may use under the chat's spec, or under a member it may ask
(a spec that only hands work on offers what its members can do): a tool the person may not use is never
suggested, so a suggestion never leads to a refusal of that kind. On a page that shows an object, first
the tools addressed by that object (its own URL argument: archive, delete, edit, its detail) and the
create tools whose form takes it ("Add a task here"); then what the person asked recently; then the
reads and declared suggestions of the whole site. A tool's own `@tool(suggest=...)` words win over the
derived ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models

from assistant.channel_policies import PANEL
from assistant.infra.text import readable_text
from assistant.models import AgentMessage
from assistant.page_context.read import PageContext
from assistant.society.members import member
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.offer import refusal
from assistant.tools.registry import registry
from assistant.tools.shows import shown_by

#: How many suggestions the panel shows at once; more is a menu nobody reads.
MAX_SUGGESTIONS = 4
RECENT_LIMIT = 2
RECENT_MAX_CHARS = 80


@dataclass(frozen=True)
class Suggestion:
    text: str
    #: "page": about the page's object; "recent": asked before; "start": what can be done anywhere.
    source: str
    tool: str | None = None

    def as_data(self) -> dict[str, Any]:
        return {"text": self.text, "source": self.source, "tool": self.tool}


def usable_tools(user: Any, spec_name: str) -> list[ViewTool | ReadTool]:
    """The declared tools `user` may use through `spec_name`: its own, and those of the members it may
    ask (and theirs), each under the member's own scope."""
    seen: set[str] = set()
    usable: dict[str, ViewTool | ReadTool] = {}
    pending = [spec_name]
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        try:
            seat = member(name)
        except ValueError:
            continue
        for definition in registry.all():
            if definition.name not in usable and refusal(user, definition, seat.scope) is None:
                usable[definition.name] = definition
        pending.extend(seat.delegates)
    return sorted(usable.values(), key=lambda definition: definition.name)


def _addressed_by(definition: ViewTool, model: type[models.Model]) -> bool:
    """A tool whose URL names one `model` row: a single-object view of it, or one marked `@shows(model)`."""
    binding = registry.binding(definition)
    if binding is None:
        return False
    shown = shown_by(definition.view)
    if shown is not None:
        return shown.model is model and shown.kwarg in binding.converters
    return definition.model is model and "pk" in binding.converters


def _made_in(definition: ViewTool, model: type[models.Model]) -> str | None:
    """What a write's form makes, when one of its fields chooses a `model` row (the page's object can be
    what it goes in): the made model's name, or None."""
    if definition.kind != "write" or registry.binding(definition) is None:
        return None
    try:
        form_class = definition.declared_form_class()
    except Exception:  # a form that cannot be built without a request says nothing here
        return None
    fields = getattr(form_class, "base_fields", {}) if form_class is not None else {}
    if not any(getattr(getattr(field, "queryset", None), "model", None) is model for field in fields.values()):
        return None
    made = definition.model or getattr(getattr(form_class, "_meta", None), "model", None)
    return _verbose(made) or None


def _derived_for_object(definition: ViewTool, kind: str) -> str | None:
    if definition.destructive:
        return f"Delete this {kind}"
    if definition.kind == "read":
        return f"Tell me about this {kind}"
    if definition.partial:
        return f"Rename this {kind}" if _has_field(definition, "name") else None
    return None


def _has_field(definition: ViewTool, name: str) -> bool:
    binding = registry.binding(definition)
    return binding is not None and name in binding.parameters.get("properties", {})


def _verbose(model: type[models.Model] | None, plural: bool = False) -> str:
    if model is None:
        return ""
    return str(model._meta.verbose_name_plural if plural else model._meta.verbose_name)


def _page_suggestions(
    tools: list[ViewTool | ReadTool], page: PageContext, model: type[models.Model],
) -> list[Suggestion]:
    # What a developer declared first, then what goes in this object, then what was derived; what removes it last.
    declared, goes_in, derived, removes = 0, 1, 2, 3
    ranked: list[tuple[int, Suggestion]] = []
    for definition in tools:
        if not isinstance(definition, ViewTool):
            continue
        if _addressed_by(definition, model):
            own = _derived_for_object(definition, page.kind)
            texts, rank = list(definition.suggest) or ([own] if own else []), derived
        elif (made := _made_in(definition, model)) is not None:
            texts, rank = list(definition.suggest) or [f"Add a {made} here"], goes_in
        else:
            continue
        if definition.destructive:
            rank = removes
        elif definition.suggest:
            rank = declared
        ranked += [(rank, Suggestion(text, "page", definition.name)) for text in texts]
    return [suggestion for _rank, suggestion in sorted(ranked, key=lambda pair: pair[0])]


#: What people new to the assistant ask first; every model is expected to answer it with what it can do.
WHAT_CAN_YOU_DO = "What can you do?"


def _start_suggestions(tools: list[ViewTool | ReadTool]) -> list[Suggestion]:
    found: list[Suggestion] = [Suggestion(WHAT_CAN_YOU_DO, "start")] if tools else []
    for definition in tools:
        if isinstance(definition, ReadTool):
            found.append(Suggestion(f"List my {_verbose(definition.model, plural=True)}", "start", definition.name))
        elif definition.suggest and registry.binding(definition) is not None and \
                "pk" not in registry.binding(definition).converters:  # type: ignore[union-attr]
            found += [Suggestion(text, "start", definition.name) for text in definition.suggest]
    return found


def _recent(user: Any) -> list[Suggestion]:
    rows = (AgentMessage.objects.filter(owner=user, role=AgentMessage.Role.USER, chat__channel=PANEL.value,
                                        run__parent__isnull=True)
            .order_by("-id").values_list("content", flat=True)[:20])
    seen: set[str] = set()
    found: list[Suggestion] = []
    for content in rows:
        text = readable_text(content, max_chars=RECENT_MAX_CHARS)
        if not text or text.lower() in seen or len(content) > RECENT_MAX_CHARS:
            continue
        seen.add(text.lower())
        found.append(Suggestion(text, "recent"))
        if len(found) == RECENT_LIMIT:
            break
    return found


def suggestions(user: Any, spec_name: str, page: PageContext | None) -> list[Suggestion]:
    """Up to MAX_SUGGESTIONS requests for `user` under `spec_name`, about `page` first when there is one."""
    tools = usable_tools(user, spec_name)
    picked: list[Suggestion] = []
    model = _model(page.model) if page is not None else None
    if page is not None and model is not None:
        picked += _page_suggestions(tools, page, model)[:MAX_SUGGESTIONS - 1]  # room for one of the others
    picked += _recent(user)
    picked += _start_suggestions(tools)
    unique: list[Suggestion] = []
    for suggestion in picked:
        if all(suggestion.text.lower() != kept.text.lower() for kept in unique):
            unique.append(suggestion)
    return unique[:MAX_SUGGESTIONS]


def _model(label: str) -> type[models.Model] | None:
    from django.apps import apps

    try:
        return apps.get_model(label)
    except (LookupError, ValueError):
        return None
