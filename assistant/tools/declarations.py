"""What a developer writes: `@tool(...)` on a view and `readable(Model, ...)` for a model.

Both only record a definition in the registry; the view itself is returned unchanged, so the page
works exactly as before for people using the browser.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.db import models
from django.views.generic.base import TemplateView
from django.views.generic.detail import BaseDetailView
from django.views.generic.edit import BaseUpdateView, DeletionMixin, ProcessFormView
from django.views.generic.list import BaseListView

from assistant.tools.registry import ATTRIBUTE, registry
from assistant.tools.schema import DerivedSchema, form_schema, parameters_schema, url_kwargs_schema

Permission = str | Sequence[str] | Callable[[Any], bool] | None
Scope = Callable[[Any, models.QuerySet], models.QuerySet] | str | None

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _clean_doc(obj: Any) -> str:
    return " ".join((inspect.getdoc(obj) or "").split())


@dataclass(eq=False)
class ViewTool:
    """A view the assistant may fire; the URL pattern that routes to it is found at first use."""

    name: str
    description: str
    view: Any
    confirm: bool = False
    destructive: bool = False
    permission: Permission = None
    method: str = "GET"
    partial: bool = False
    form_class: type[forms.BaseForm] | None = None
    fields: list[str] | None = None
    descriptions: dict[str, str] = field(default_factory=dict)
    #: `describe(request, **arguments) -> str`: the approval card's sentence, as the person sees the objects
    #: (see assistant/tools/describe.py); None: derived from the view.
    describe: Callable[..., str] | None = None
    #: How `method` was decided: "declared" (method=), "proved" (the view shows it), or "assumed" (a
    #: write, because nothing shows it only reads); `kind_reason` says it in words.
    kind_basis: str = "declared"
    kind_reason: str = ""
    #: Requests the panel suggests where this tool fits ("Archive this project"): on a page showing the
    #: tool's object for tools addressed by it, in an empty chat otherwise (assistant/page_context/).
    suggest: tuple[str, ...] = ()
    #: A template of the site that draws the object a call acted on or showed (assistant/live/cards.py), shown
    #: under its step; None: no card.
    card: str | None = None

    kind_of = "view"

    @property
    def kind(self) -> str:
        return "read" if self.method == "GET" else "write"

    @property
    def is_class_view(self) -> bool:
        return inspect.isclass(self.view)

    @property
    def model(self) -> type[models.Model] | None:
        if self.is_class_view:
            model = getattr(self.view, "model", None)
            queryset = getattr(self.view, "queryset", None)
            if model is None and queryset is not None:
                model = queryset.model
            if model is not None:
                return model
        meta = getattr(self.form_class, "_meta", None)
        return getattr(meta, "model", None)

    def derive_schema(self, converters: dict[str, Any]) -> tuple[DerivedSchema, dict[str, Any]]:
        """The arguments: URL kwargs, then the form's fields (writes), then typed keyword parameters."""
        form_class = self.declared_form_class() if self.method == "POST" else None
        model = self.model or getattr(getattr(form_class, "_meta", None), "model", None)
        derived = url_kwargs_schema(converters, self.descriptions, str(model._meta.verbose_name) if model else None)
        annotations: dict[str, Any] = {}
        if form_class is not None:
            derived.merge(form_schema(form_class, partial=self.partial))
        if not self.is_class_view:
            params, annotations = parameters_schema(self.view, converters, self.descriptions)
            derived.merge(params)
        for name, text in self.descriptions.items():
            if name in derived.properties:
                derived.properties[name]["description"] = text
        return derived, annotations

    def declared_form_class(self) -> type[forms.BaseForm] | None:
        """The form the view validates: given to `@tool(form=...)`, or the class-based view's own."""
        if self.form_class is not None or not self.is_class_view:
            return self.form_class
        if not hasattr(self.view, "get_form_class"):
            return None
        view = self.view()
        view.object = None
        view.kwargs = {}
        return view.get_form_class()


@dataclass(eq=False)
class ReadTool:
    """Read access to a model's declared fields, limited to the rows `scope` gives the user."""

    name: str
    description: str
    model: type[models.Model]
    fields: list[str]
    scope: Scope = None
    search_fields: list[str] = field(default_factory=list)
    ordering: list[str] = field(default_factory=list)
    permission: Permission = None
    confirm: bool = False

    kind_of = "read"
    kind = "read"
    destructive = False
    method = "GET"


def _default_name(view: Any) -> str:
    module = view.__module__.split(".")[0]
    base = re.sub(r"(?<!^)(?=[A-Z])", "_", view.__name__).lower().removesuffix("_view")
    return f"{module}_{base}"


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Django's display views: their own GET handler fetches and renders, and changes nothing.
DISPLAY_VIEWS: tuple[type, ...] = (BaseListView, BaseDetailView, TemplateView)


def accepted_methods(view: Any) -> frozenset[str] | None:
    """The methods a function view's `require_http_methods` family of decorators lets through (those
    decorators leave only a closure over `request_method_list`), or None when none restricts them."""
    accepted: frozenset[str] | None = None
    current = view
    while current is not None:
        code = getattr(current, "__code__", None)
        if code is not None and code.co_qualname.startswith("require_http_methods.") and current.__closure__:
            cells = dict(zip(code.co_freevars, current.__closure__, strict=True))
            if "request_method_list" in cells:
                methods = frozenset(str(m).upper() for m in cells["request_method_list"].cell_contents)
                accepted = methods if accepted is None else accepted & methods
        current = getattr(current, "__wrapped__", None)
    return accepted


def infer_method(view: Any, form: type[forms.BaseForm] | None) -> tuple[str, str, str]:
    """(method, basis, reason) for a view whose method is not declared: GET, a read, only when the view
    proves it only reads; otherwise POST, a write — offered only where writes are, run in a transaction."""
    if inspect.isclass(view):
        name = view.__name__
        if issubclass(view, DeletionMixin):
            return "POST", "proved", f"{name} is a delete view"
        if issubclass(view, ProcessFormView):
            return "POST", "proved", f"{name} is a form view"
        display = next((base for base in DISPLAY_VIEWS if issubclass(view, base)), None)
        if display is not None:
            owner = next(klass for klass in view.__mro__ if "get" in vars(klass))
            if owner.__module__.startswith("django.views.generic."):
                shown = {"BaseListView": "ListView", "BaseDetailView": "DetailView"}.get(
                    display.__name__, display.__name__)
                return "GET", "proved", f"{name} is Django's {shown}, whose GET handler only reads"
            return "POST", "assumed", f"{name} overrides get(), so nothing proves it only reads"
        return "POST", "assumed", (f"nothing proves {name} only reads (it is not a ListView, DetailView or "
                                   "TemplateView)")
    if form is not None:
        return "POST", "proved", "it validates a form (form=)"
    accepted = accepted_methods(view)
    if accepted is not None and "GET" in accepted and accepted <= SAFE_METHODS:
        decorator = {frozenset({"GET"}): "require_GET", frozenset({"GET", "HEAD"}): "require_safe"}.get(
            accepted, "require_http_methods")
        return "GET", "proved", f"it accepts only {', '.join(sorted(accepted))} ({decorator})"
    if accepted is not None and not accepted & SAFE_METHODS:
        return "POST", "proved", f"it accepts only {', '.join(sorted(accepted))}"
    if accepted is not None:
        unsafe = ", ".join(sorted(accepted - SAFE_METHODS))
        return "POST", "assumed", f"it accepts {unsafe}, so nothing proves it only reads"
    return "POST", "assumed", ("nothing declares or proves it only reads (no method=, form=, require_GET or "
                               "require_safe)")


def tool(
    description: str | None = None,
    *,
    name: str | None = None,
    confirm: bool = False,
    destructive: bool | None = None,
    permission: Permission = None,
    method: str | None = None,
    form: type[forms.BaseForm] | None = None,
    partial: bool | None = None,
    fields: Sequence[str] | None = None,
    descriptions: dict[str, str] | None = None,
    describe: Callable[..., str] | None = None,
    suggest: str | Sequence[str] | None = None,
    card: str | None = None,
) -> Callable[[Any], Any]:
    """Declare a view (function or class) as an assistant tool; returns the view unchanged.

    `description` defaults to the docstring. `confirm=True` asks the user before it runs.
    `permission` is a permission codename (or several, or a callable taking the user) needed to be
    offered the tool. For class-based form views the method (POST), the form, `destructive` (delete
    views) and `partial` (update views: omitted fields keep their current values) are inferred.
    A tool is a read (GET) only when `method="GET"` says so or the view proves it: a function view
    that accepts only safe methods (`require_GET`, `require_safe`), or a ListView, DetailView or
    TemplateView whose GET handler is Django's own. Anything else is a write (POST). `fields` lists
    the object fields a list/detail view (any TemplateResponse with `object` or `object_list` in its
    context) hands back; without it, or from a plain `render()`, the page cannot be read and the model
    is told so. Keyword-only typed parameters of a function view become arguments too.

    `describe(request, **arguments) -> str` says, for the approval card, what a call will do ("Delete the
    project “Home” and its 4 tasks"). It runs inside the site's middleware with the person's session
    (`request.user` is the person), in a transaction that is rolled back; it must look objects up as the
    view does, so that it names nothing the person could not open (Http404 or PermissionDenied: the card
    then names only what the model sent). Without it, class-based views are described from their own
    `get_object()` and `get_form()` as the person, other views from the description and the arguments.

    `suggest` is a request (or several) the panel offers as a one-click suggestion where the tool fits:
    "Archive this project" on the project's page, "List my projects" in an empty chat. Offered only to
    people who may use the tool; without it a suggestion is derived where one can be (see
    docs/page-context.md).

    `card` names a template of the site ("tracker/task_card.html") that draws the object a call acted on or
    showed, under its step in the panel: the object the call's own address names, else the one the view sent the
    person to. It is given the object as they may read it (its declared reads' fields, as `object` and by its
    model's name), rendered when the call has taken effect (a read: when it answered) and sanitised like a reply
    (docs/tools.md, "Cards").
    """
    if describe is not None and not callable(describe):
        raise TypeError(f"@tool(describe=...) must be callable, not {type(describe).__name__}.")
    suggestions = (suggest,) if isinstance(suggest, str) else tuple(suggest or ())
    if not all(isinstance(text, str) and text.strip() for text in suggestions):
        raise TypeError("@tool(suggest=...) takes a request as text, or a list of them.")
    if card is not None and (not isinstance(card, str) or not card.strip()):
        raise TypeError("@tool(card=...) takes a template's name, such as \"tracker/task_card.html\".")

    def decorate(view: Any) -> Any:
        is_class = inspect.isclass(view)
        text = " ".join((description or "").split()) or _clean_doc(view)
        if method is not None:
            inferred_method, basis, reason = method.upper(), "declared", f"declared method={method.upper()!r}"
        else:
            inferred_method, basis, reason = infer_method(view, form)
        inferred_destructive = is_class and issubclass(view, DeletionMixin)
        inferred_partial = is_class and issubclass(view, BaseUpdateView)
        definition = ViewTool(
            name=name or _default_name(view),
            description=text,
            view=view,
            confirm=confirm,
            destructive=inferred_destructive if destructive is None else destructive,
            permission=permission,
            method=inferred_method,
            partial=inferred_partial if partial is None else partial,
            form_class=form,
            fields=list(fields) if fields is not None else None,
            descriptions=dict(descriptions or {}),
            describe=describe,
            suggest=tuple(" ".join(text.split()) for text in suggestions),
            kind_basis=basis,
            kind_reason=reason,
            card=card,
        )
        if definition.method not in {"GET", "POST"}:
            raise ValueError(f"Tool {definition.name!r}: method must be GET or POST, not {definition.method!r}.")
        registry.register(definition)
        # Recorded on the view so the URL pattern that routes to it can be recognised; function
        # decorators applied on top (login_required, require_POST) copy it through functools.wraps.
        setattr(view, ATTRIBUTE, definition)
        return view

    return decorate


def readable(
    model: type[models.Model],
    *,
    fields: Sequence[str],
    scope: Scope = None,
    name: str | None = None,
    description: str | None = None,
    search: Sequence[str] | None = None,
    ordering: Sequence[str] | None = None,
    permission: Permission = None,
) -> ReadTool:
    """Make `model` readable by the assistant: a read tool over `fields`, limited by `scope`.

    `scope` says which rows each person may read, in one of two ways:

    - a string names a method of the queryset the model's default manager gives, called with the
      person: `scope="for_user"` reads `Task.objects.all().for_user(user)`. Define it on the model's
      QuerySet and make that the manager (`objects = TaskQuerySet.as_manager()`, or
      `Manager.from_queryset(TaskQuerySet)()`); a method on the Manager alone is not found (check
      `assistant.E017` says so);
    - a callable `scope(user, queryset) -> queryset` gets the person and every row of the default
      manager and returns those they may read:
      `scope=lambda user, books: books.filter(owner=user)`.

    Without a scope the model is declared but never readable (default deny; check `assistant.W010`
    warns). Only the scoped rows are read, and only `fields` of them. `search` lists the fields
    free text looks in (default: the declared text fields).
    """
    meta = model._meta
    verbose = str(meta.verbose_name_plural)
    definition = ReadTool(
        name=name or f"{meta.app_label}_{meta.model_name}_list",
        description=" ".join((description or f"List {verbose} you can see, with their {', '.join(fields)}.").split()),
        model=model,
        fields=list(fields),
        scope=scope,
        search_fields=list(search) if search is not None else [],
        ordering=list(ordering) if ordering is not None else [],
        permission=permission,
    )
    registry.register(definition)
    return definition
