"""What can be proved, without running it, about how a view tool's view answers.

The executor reads an outcome from the response (assistant/tools/outcome.py): a redirect, JSON, form errors,
or the declared `fields=` of the object(s) a TemplateResponse carries. A page rendered with `render()` carries none of
these, so the model gets no answer (and a write is rolled back). The system checks use this module to
say so before anyone calls the tool — but only where it is a proof: a view that answers through a
helper, under a decorator of the site's own, or with a method it overrides is left alone, because a
check that warns about working code is worse than none. The executor still says it at run time.
"""

from __future__ import annotations

import ast
import inspect
import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import django
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.http import HttpResponse, HttpResponsePermanentRedirect, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.template.response import TemplateResponse
from django.views.generic.base import TemplateView
from django.views.generic.detail import BaseDetailView
from django.views.generic.list import BaseListView

from assistant.tools.declarations import ViewTool

# How to fix a tool whose answer cannot be read: in the warning outcome.py logs and the checks' hints.
READ_FIX = ("return a TemplateResponse (or a ListView/DetailView) with the object(s) in its context as 'object' "
            "or 'object_list' and declare @tool(fields=[...]) with the fields the assistant may see, return a "
            "JsonResponse, or declare a readable(Model, fields=..., scope=...) read instead")
WRITE_FIX = ("redirect after success (messages added with django.contrib.messages travel with it), return a "
             "TemplateResponse with the bound form in its context as 'form' when it has errors (they reach the "
             "model by field), or "
             "return a JsonResponse")
FIELDS_FIX = "declare @tool(fields=[...]) with the fields the assistant may see"

_DJANGO_DIR = str(Path(django.__file__).resolve().parent) + os.sep

PAGE, UNREAD_TEMPLATE, REDIRECT, OTHER = "page", "unread template", "redirect", "other"
_REDIRECTS: tuple[Any, ...] = (redirect, HttpResponseRedirect, HttpResponsePermanentRedirect)


def _is_djangos(function: Any) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and str(Path(code.co_filename).resolve()).startswith(_DJANGO_DIR)


def _own_function(view: Any) -> Callable[..., Any] | None:
    """The function the developer wrote, beneath decorators that are Django's own (login_required,
    require_GET, csrf_exempt...: they hand the response back unchanged); None when any other decorator
    wraps it, since that one may turn the page into anything."""
    current = view
    while True:
        wrapped = getattr(current, "__wrapped__", None)
        if wrapped is None:
            return current if inspect.isfunction(current) else None
        if not _is_djangos(current):
            return None
        current = wrapped


def _own_returns(node: ast.AST) -> Iterator[ast.Return]:
    """The return statements of this function, not of functions or classes defined inside it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Return):
            yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            yield from _own_returns(child)


def _resolve(expression: ast.expr, function: Any) -> Any:
    """What a name (or dotted name) in the function's body refers to, from its module's globals; None
    when it is a local or a closure's variable, or anything but a plain name."""
    if isinstance(expression, ast.Name):
        code = function.__code__
        if expression.id in code.co_varnames or expression.id in code.co_freevars:
            return None
        return function.__globals__.get(expression.id)
    if isinstance(expression, ast.Attribute):
        base = _resolve(expression.value, function)
        return getattr(base, expression.attr, None) if base is not None else None
    return None


def _template_context(call: ast.Call) -> ast.expr | None:
    """The context argument of `TemplateResponse(request, template, context, ...)`, if given."""
    if len(call.args) >= 3:
        return call.args[2]
    return next((keyword.value for keyword in call.keywords if keyword.arg == "context"), None)


def _answer_kind(value: ast.expr | None, function: Any, fields: list[str] | None) -> str:
    """How one `return` answers, where it is certain: PAGE for `render(...)` or `HttpResponse(content)`
    as written (no content type, status or headers), UNREAD_TEMPLATE for a `TemplateResponse` whose
    objects the executor will not read (no fields=, or a literal context without 'object'/'object_list'),
    REDIRECT for `redirect(...)` and the redirect responses; OTHER for anything this cannot prove."""
    if not isinstance(value, ast.Call):
        return OTHER
    target = _resolve(value.func, function)
    keywords = {keyword.arg for keyword in value.keywords}
    if None in keywords or any(isinstance(arg, ast.Starred) for arg in value.args):
        return OTHER
    if any(target is candidate for candidate in _REDIRECTS):
        return REDIRECT
    if target is render and not keywords & {"content_type", "status"} and len(value.args) <= 3:
        return PAGE
    if target is HttpResponse and len(value.args) == 1 and not keywords - {"charset"}:
        return PAGE
    if target is TemplateResponse and not keywords & {"content_type", "status"} and len(value.args) <= 3:
        if fields is None:
            return UNREAD_TEMPLATE
        context = _template_context(value)
        if context is None or (isinstance(context, ast.Constant) and context.value is None):
            return UNREAD_TEMPLATE
        if isinstance(context, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in context.keys
        ) and not {key.value for key in context.keys if isinstance(key, ast.Constant)} & {"object", "object_list"}:
            return UNREAD_TEMPLATE
    return OTHER


def answer_kinds(view: Any, fields: list[str] | None) -> list[str] | None:
    """How each `return` of a function view (or a class view's handler method) answers, or None when
    its source cannot be read or something between the caller and it is not Django's own."""
    function = _own_function(view)
    if function is None or inspect.isgeneratorfunction(function):
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    return [_answer_kind(ret.value, function, fields) for ret in _own_returns(node)] or None


def _never_read(kinds: list[str] | None, where: str) -> tuple[str, str] | None:
    """(why, fix) when every answer is one the executor cannot read (or a redirect), at least one not."""
    if not kinds or not set(kinds) <= {PAGE, UNREAD_TEMPLATE, REDIRECT} or set(kinds) == {REDIRECT}:
        return None
    shown = [text for kind, text in ((PAGE, "a plain rendered page (render() or an HttpResponse)"),
                                     (UNREAD_TEMPLATE, "a TemplateResponse with no 'object' or 'object_list' "
                                      "read through fields="),
                                     (REDIRECT, "a redirect")) if kind in kinds]
    return f"every answer {where} is {' or '.join(shown)}", READ_FIX


def _owner(view_class: type, attribute: str) -> type | None:
    return next((klass for klass in view_class.__mro__ if attribute in vars(klass)), None)


def _djangos_own(view_class: type, attribute: str) -> bool:
    """Whether the class's `attribute` is Django's own (or absent): not written by the site."""
    owner = _owner(view_class, attribute)
    return owner is None or owner.__module__.startswith("django.")


def unreadable_read(definition: ViewTool) -> tuple[str, str] | None:
    """(why, fix) when a read (GET) tool's answer can never be read, and that is certain; otherwise None."""
    view, fields = definition.view, definition.fields
    if not definition.is_class_view:
        return _never_read(answer_kinds(view, fields), "it gives")
    if not _djangos_own(view, "get"):
        handler = vars(_owner(view, "get") or object).get("get")
        return _never_read(answer_kinds(handler, fields), f"{view.__name__}.get() gives") if handler else None
    display = issubclass(view, BaseListView | BaseDetailView | TemplateView)
    template_response = _djangos_own(view, "render_to_response") and issubclass(
        getattr(view, "response_class", object), TemplateResponse)
    if not (display and template_response):
        return None
    if definition.fields is None:
        return (f"{view.__name__} answers with a TemplateResponse, whose objects are read only through fields=, "
                "and @tool declares none"), FIELDS_FIX
    if not issubclass(view, BaseListView | BaseDetailView) and _djangos_own(view, "get_context_data"):
        return (f"{view.__name__} is a TemplateView whose context has no 'object' or 'object_list' to read "
                "fields= from"), READ_FIX
    return None


def unreadable_write(definition: ViewTool) -> str | None:
    """Why a write (POST) tool can never take effect, when that is certain; otherwise None. A write that
    answers with a page is rolled back: nothing tells whether it worked."""
    view = definition.view
    if definition.is_class_view:
        if _djangos_own(view, "post"):
            return None
        view = vars(_owner(view, "post") or object).get("post")
        if view is None:
            return None
    kinds = answer_kinds(view, None)
    if kinds and set(kinds) == {PAGE}:
        return "every answer it gives is a plain rendered page (render() or an HttpResponse), never a redirect"
    return None


def _may_carry_other_attributes(view: Any) -> bool:
    """Whether the objects a class view hands over may carry attributes its model does not declare:
    annotations or prefetches added by a queryset or object lookup the view writes itself."""
    if not (_djangos_own(view, "get_queryset") and _djangos_own(view, "get_object")
            and _djangos_own(view, "get_context_data")):
        return True
    queryset = getattr(view, "queryset", None)
    return queryset is not None and bool(queryset.query.annotations or queryset._prefetch_related_lookups)


def _missing(model: type[models.Model], name: str, first_may_be_extra: bool) -> bool:
    current: Any = model
    for position, part in enumerate(name.split("__")):
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist:
            # A property or method of the class is there; an attribute set on the instance (an annotation)
            # may be, where the view builds its own queryset; past that, nothing can be followed.
            return not hasattr(current, part) and not (position == 0 and first_may_be_extra)
        current = field.related_model
        if current is None:
            return False  # a plain field with more parts after it: not followed
    return False


def missing_fields(definition: ViewTool) -> list[str]:
    """The declared fields= that the class view's model certainly does not have (misspellings)."""
    model = definition.model
    if definition.fields is None or not definition.is_class_view or model is None:
        return []
    extra = _may_carry_other_attributes(definition.view)
    return [name for name in definition.fields if _missing(model, name, extra)]
