"""System checks for declared tools (assistant.E010… / W010…), run by `manage.py check` and at start-up; and,
on request only, how each view tool was proved a read (assistant.I010):
`manage.py check --deploy --tag assistant_tools`."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Info, Warning, register
from django.core.exceptions import FieldDoesNotExist
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template

from assistant.conf import assistant_settings, needs_assistant_settings
from assistant.tools.declarations import TOOL_NAME, ReadTool, ViewTool
from assistant.tools.offer import PROFILES
from assistant.tools.pages import WRITE_FIX, missing_fields, unreadable_read, unreadable_write
from assistant.tools.provenance import CONTAINMENTS, declared_authorships, model_field, path_problem, undeclared_writers
from assistant.tools.registry import _where, registry


def _answer_messages(definition: ViewTool) -> list[CheckMessage]:
    """A tool whose view's answer can never be read (proved from the view, never guessed: see tools/pages.py)."""
    messages: list[CheckMessage] = []
    if definition.kind == "read":
        unreadable = unreadable_read(definition)
        if unreadable is not None:
            why, fix = unreadable
            messages.append(Warning(
                f"Read tool {definition.name!r} can never give the model an answer: {why}. The model is told it "
                "got nothing it can read.",
                hint=f"To fix: {fix}.",
                obj=_where(definition), id="assistant.W015",
            ))
    else:
        write_problem = unreadable_write(definition)
        if write_problem is not None:
            messages.append(Warning(
                f"Write tool {definition.name!r} can never take effect: {write_problem}. Without a redirect "
                "nothing tells whether it worked, so every call is rolled back and the model is told so.",
                hint=f"To fix: {WRITE_FIX}.", obj=_where(definition), id="assistant.W016",
            ))
    missing = missing_fields(definition)
    if missing:
        label = definition.model._meta.label if definition.model is not None else "its model"
        messages.append(Error(
            f"Tool {definition.name!r} declares fields= that {label} does not have: "
            f"{', '.join(repr(name) for name in missing)}.",
            hint="Name fields of the model (or its properties), following relations with '__'.",
            obj=_where(definition), id="assistant.E016",
        ))
    return messages


def _card_messages(definition: ViewTool) -> list[CheckMessage]:
    """A card template that cannot be loaded: every step of the tool would go without its card."""
    if not definition.card:
        return []
    try:
        get_template(definition.card)
    except TemplateDoesNotExist:
        problem = "is not found by any template loader"
    except TemplateSyntaxError as exc:
        problem = f"does not compile: {exc}"
    else:
        return []
    return [Error(
        f"Tool {definition.name!r} declares card={definition.card!r}, which {problem}.",
        hint="Name a template of an installed app (its templates/ folder) or of TEMPLATES' DIRS, as render() would.",
        obj=_where(definition), id="assistant.E018",
    )]


def _view_messages(definition: ViewTool) -> list[CheckMessage]:
    messages = _answer_messages(definition) + _card_messages(definition)
    binding = registry.binding(definition)
    if binding is None:
        messages.append(Error(
            f"Tool {definition.name!r} is declared on a view that no named URL pattern routes to.",
            hint="Route the view with path(..., name=...); the executor reverses that name.",
            obj=_where(definition), id="assistant.E012",
        ))
        return messages
    if binding.problem:
        messages.append(Error(
            f"Tool {definition.name!r} cannot be offered: {binding.problem}.",
            hint="Give the form JSON-friendly fields, or pass form=... to @tool.",
            obj=_where(definition), id="assistant.E013",
        ))
    elif binding.unsupported:
        messages.append(Warning(
            f"Tool {definition.name!r} leaves out optional field(s) with no JSON form: "
            f"{', '.join(binding.unsupported)}.",
            hint="The assistant cannot fill them; that is fine if they are truly optional.",
            obj=_where(definition), id="assistant.W012",
        ))
    if definition.kind_basis == "assumed":
        messages.append(Warning(
            f"Tool {definition.name!r} is treated as a write: {definition.kind_reason}. It is offered only "
            "where writes are allowed and is fired as a POST, in a transaction.",
            hint='If it only reads, declare method="GET" (or put @require_GET / @require_safe beneath @tool, '
            'where it can see them); if it writes, declare method="POST" to say so.',
            obj=_where(definition), id="assistant.W013",
        ))
    if definition.kind == "write" and definition.permission is None and not binding.guarded:
        messages.append(Warning(
            f"Write tool {definition.name!r} has no permission story: no permission= and the view "
            "does not require a login.",
            hint="Add @login_required / LoginRequiredMixin (and scope the queryset), or permission=...",
            obj=_where(definition), id="assistant.W011",
        ))
    return messages


def _read_messages(definition: ReadTool) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    label = definition.model._meta.label
    if definition.scope is None:
        messages.append(Warning(
            f"{label} is declared readable ({definition.name!r}) without a scope, so nothing can be read.",
            hint="Pass scope=lambda user, qs: qs.filter(owner=user) (or the name of a queryset method).",
            obj=definition.model, id="assistant.W010",
        ))
    elif isinstance(definition.scope, str):
        # Read as the executor reads it (tools/reads.py): a method of the default manager's queryset.
        queryset = definition.model._default_manager.all()
        if not callable(getattr(queryset, definition.scope, None)):
            messages.append(Error(
                f"Read tool {definition.name!r} has scope={definition.scope!r}, which is no method of "
                f"{label}'s queryset ({type(queryset).__name__}), so every read of it fails.",
                hint=f"Define {definition.scope}(self, user) on the model's QuerySet and make it the default manager "
                "(objects = MyQuerySet.as_manager(), or Manager.from_queryset(MyQuerySet)()), or pass "
                "scope=lambda user, queryset: queryset.filter(owner=user).",
                obj=definition.model, id="assistant.E017",
            ))
    for name in [*definition.fields, *definition.search_fields, *(o.lstrip("-") for o in definition.ordering)]:
        try:
            model_field(definition.model, name)
        except FieldDoesNotExist:
            messages.append(Error(
                f"Read tool {definition.name!r} names {name!r}, which is not a field of {label}.",
                hint="Use model field names, following relations with '__'.",
                obj=definition.model, id="assistant.E014",
            ))
    return messages


def _authorship_messages(definition: ReadTool | ViewTool) -> list[CheckMessage]:
    """A read that shows the text of a model with users and no word on who writes it: its text counts as
    someone else's (safe, but every write after such a read asks the person), which is rarely what is meant."""
    model = definition.model
    fields = definition.fields if isinstance(definition, ReadTool) else (definition.fields or [])
    if model is None or (isinstance(definition, ViewTool) and definition.kind != "read"):
        return []
    messages: list[CheckMessage] = []
    for holder, users in undeclared_writers(model, fields):
        suggestion = (f"authored({holder.__name__}, by={users[0]!r})" if len(users) == 1
                      else f"authored({holder.__name__}, by={users!r})")
        messages.append(Warning(
            f"Tool {definition.name!r} shows text of {holder._meta.label}, which has users but nothing says "
            "who writes its text: it counts as someone else's, so every write after reading it asks the person.",
            hint=f"Declare once, in the app's assistant_tools.py: {suggestion} (everyone who may change the text), "
            f"or authored({holder.__name__}, site=True) for text only the site writes.",
            obj=holder, id="assistant.W027",
        ))
    return messages


def _declared_authorship_messages() -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for declared in declared_authorships():
        for path in declared.by:
            problem = path_problem(declared, path)
            if problem is not None:
                messages.append(Error(
                    f"authored({declared.model.__name__}, by=...) names {path!r}: {problem}, so nobody can tell "
                    "who wrote its rows' text (it counts as someone else's).",
                    hint="Name relations from the model to the user model, following relations with '__' "
                    "(e.g. 'author', 'project__members').",
                    obj=declared.model, id="assistant.E028",
                ))
    return messages


# `manage.py check --tag assistant_tools` runs the tools' checks alone; with `--deploy`, the proofs too.
TOOLS_TAG = "assistant_tools"


@register(TOOLS_TAG)
@needs_assistant_settings
def check_tools(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Every declared tool has a usable name, a description and, for views, a route and a schema."""
    messages: list[CheckMessage] = []
    for definition in registry.all():
        if not TOOL_NAME.match(definition.name):
            messages.append(Error(
                f"Tool name {definition.name!r} is not usable by model providers.",
                hint="Use 1-64 letters, digits, '_' or '-'.", id="assistant.E011",
            ))
        if not definition.description:
            messages.append(Error(
                f"Tool {definition.name!r} has no description; the model would not know when to use it.",
                hint="Pass description=... or give the view a docstring.", id="assistant.E010",
            ))
        if isinstance(definition, ViewTool):
            messages.extend(_view_messages(definition))
        else:
            messages.extend(_read_messages(definition))
        messages.extend(_authorship_messages(definition))
    messages.extend(_declared_authorship_messages())
    return messages


@register(TOOLS_TAG, deploy=True)
@needs_assistant_settings
def check_view_tool_kinds(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Each view tool proved a read, and how (I010). Every command a developer runs (runserver, migrate,
    check) runs the system checks and prints every message they return, so news about tools that work is
    kept to a run that asks for it — `--deploy`, which Django runs only on request — and the tag narrows
    that run to the tools. What needs a fix (W013, a view taken as a write) is said by `check_tools` always."""
    return [
        Info(
            f"Tool {definition.name!r} is a read: {definition.kind_reason}. Reads are offered under the "
            "restricted profile and run without a transaction.",
            obj=_where(definition), id="assistant.I010",
        )
        for definition in registry.all()
        if isinstance(definition, ViewTool) and definition.kind_basis == "proved" and definition.kind == "read"
    ]


@register()
@needs_assistant_settings
def check_specs(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Every permission profile named in settings exists, and every tool a spec lists is declared: a
    misspelt profile would fail every run under it, a misspelt tool would silently never be offered."""
    messages: list[CheckMessage] = []
    named = [("PERMISSION_PROFILE", assistant_settings.PERMISSION_PROFILE)]
    for spec_name, spec in assistant_settings.SPECS.items():
        declared = spec.get("permission_profile", spec.get("profile")) if isinstance(spec, dict) else None
        if isinstance(declared, str):
            named.append((f"SPECS[{spec_name!r}]", declared))
        tools = spec.get("tools") if isinstance(spec, dict) else None
        if isinstance(tools, list | tuple | set | frozenset):
            unknown = sorted(str(name) for name in tools if name not in registry)
            if unknown:
                messages.append(Warning(
                    f"SPECS[{spec_name!r}] lists tool(s) that are not declared: {', '.join(unknown)}.",
                    hint="Check the names with `manage.py assistant_tools`.", id="assistant.W014",
                ))
    if assistant_settings.CONTAINMENT not in CONTAINMENTS:
        messages.append(Error(
            f"CONTAINMENT is {assistant_settings.CONTAINMENT!r}.",
            hint=f"Choose one of: {', '.join(CONTAINMENTS)} (approve by default).", id="assistant.E037",
        ))
    for where, profile in named:
        if profile not in PROFILES:
            messages.append(Error(
                f"{where} names the permission profile {profile!r}, which does not exist.",
                hint=f"Use one of: {', '.join(PROFILES)}.", id="assistant.E015",
            ))
    return messages
