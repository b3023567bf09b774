"""What a tool call that waits for the person will do, in words: the sentence on the approval card.

"Delete the project “Home” and its 4 tasks" — naming the objects as the person sees them, because it is
the person's own view that looks them up: the lookup is a request through the site's own middleware, made
with the session the message was sent from (as a tool call is, see `tools/request.py`), whose innermost
call instantiates the tool's class-based view as that person (`setup()`, its `dispatch()` with its access
mixins and decorators, then its own `get_object()` / `get_form()`), or calls the tool's `describe=`.

It never reveals what the person could not open: when the lookup fails as them (404, PermissionDenied, a
gate middleware, an ended session, any exception) the sentence names only what the model sent ("Delete the
project #7 — it could not be found for you; …"), never the object's name or what depends on it. Cascaded
rows are counted by kind, never named. It has no side effects: everything runs in a transaction that is
rolled back. It never raises: a failure is logged and described without the object. At most
`MAX_SUMMARY_CHARS` characters; names are cut at `MAX_NAME_CHARS`.

URL patterns that decorate a class-based view outside the class (`login_required(View.as_view())`) hide
their checks from a lookup that instantiates the class: such a tool is described without a lookup. Put the
checks on the class (an access mixin or `method_decorator`), or give the tool a `describe=`.
"""

from __future__ import annotations

import enum
import functools
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import models, router, transaction
from django.db.models.deletion import Collector, ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.urls import NoReverseMatch, ResolverMatch, reverse
from django.views.generic.base import View
from django.views.generic.detail import SingleObjectMixin
from django.views.generic.edit import BaseCreateView, BaseUpdateView, DeletionMixin, FormMixin

from assistant.access.authority import SentFrom
from assistant.infra.text import readable_text
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.executor import _form_value, _sent
from assistant.tools.offer import Tool, parameters_of
from assistant.tools.registry import own_match, registry
from assistant.tools.request import build_request
from assistant.tools.validation import validate_arguments

logger = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 300
MAX_NAME_CHARS = 60
# The function Django's View.as_view() returns: a URL callback that is exactly it carries no decorator of its own.
_AS_VIEW_CODE = View.as_view().__code__

__all__ = ["MAX_NAME_CHARS", "MAX_SUMMARY_CHARS", "describe_call"]


class Unseen(enum.Enum):
    """Why the object could not be looked up as the person; each says so without naming anything."""

    NOT_FOUND = "it could not be found for you; the action will most likely fail"
    DENIED = "you may not do this; the action will most likely fail"
    REFUSED = "the site did not let it be looked up for you; the action will most likely fail"
    SESSION = "the session it was asked from has ended; the action will not run"
    INVALID = "the arguments do not fit this tool; it will be refused"
    NOWHERE = "these arguments do not lead to this tool's own page; it will be refused"
    ERROR = "it could not be looked up; the action may fail"
    UNCHECKED = ""  # described without a lookup (nothing failed)


class _Refused(Exception):
    def __init__(self, why: Unseen) -> None:
        super().__init__(why.name)
        self.why = why


# --- words --------------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    # On one line, and without what would hide or reorder a name on the card (a bidi override in a name
    # saved by other code, or sent by the model), as the person's own titles are kept.
    text = readable_text(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _name(obj: Any) -> str:
    """The object as the site shows it (its `str()`), on one line and cut short."""
    try:
        text = str(obj)
    except Exception:  # a broken __str__ must not lose the sentence
        text = ""
    text = _clip(text, MAX_NAME_CHARS)
    return text or f"#{getattr(obj, 'pk', '?')}"


def _quoted(text: str) -> str:
    return f"“{_clip(text, MAX_NAME_CHARS)}”"


def _verbose(model: type[models.Model] | None, plural: bool = False) -> str:
    if model is None:
        return "object"
    meta = model._meta
    return str(meta.verbose_name_plural if plural else meta.verbose_name)


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _label(field: forms.Field | None, name: str) -> str:
    text = str(field.label) if field is not None and field.label else name.replace("_", " ")
    text = _clip(text, 40)
    # "Due date" reads "due date" inside a sentence; "URL" stays "URL".
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def first_sentence(description: str, fallback: str) -> str:
    text = " ".join(description.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = (match.group(1) if match else text).rstrip(".")
    return sentence or fallback


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _raw(value: Any) -> str:
    """A value the model sent, in words (it came from the model: nothing here is looked up)."""
    if value is None or value == "":
        return "empty"
    if isinstance(value, bool):
        return "“yes”" if value else "“no”"
    if isinstance(value, list | tuple):
        return ", ".join(_raw(item) for item in value) or "none"
    if isinstance(value, int | float):
        return str(value)
    return _quoted(str(value))


def _choice_label(field: forms.ChoiceField, raw: Any) -> str | None:
    choices: Iterable[Any] = field.choices  # type: ignore[assignment]  # a form field's are normalised to a list
    for value, label in choices:
        if isinstance(label, list | tuple):  # an optgroup
            for inner_value, inner_label in label:
                if str(inner_value) == str(raw):
                    return str(inner_label)
        elif str(value) == str(raw):
            return str(label)
    return None


def _display(field: forms.Field | None, raw: Any, *, look_up: bool) -> str:
    """A submitted form value as the person would read it on the page. Related objects are shown through
    the field's own queryset only when `look_up` (the form the view built as the person); otherwise, and
    when the value is not among them, as the id the model sent."""
    if field is None:
        return _raw(raw)
    if isinstance(field, forms.ModelMultipleChoiceField):
        if look_up:
            try:
                return ", ".join(_quoted(_name(obj)) for obj in field.clean(raw)) or "none"
            except ValidationError:
                pass
        return ", ".join(f"#{item}" for item in (raw if isinstance(raw, list | tuple) else [raw])) or "none"
    if isinstance(field, forms.ModelChoiceField):
        if raw in (None, "", []):
            return "none"
        if look_up:
            try:
                obj = field.clean(raw)
            except ValidationError:
                obj = None
            if obj is not None:
                return _quoted(_name(obj))
        shown = raw[0] if isinstance(raw, list | tuple) and raw else raw
        return f"#{shown}" if str(shown).isdigit() else _raw(shown)
    if isinstance(field, forms.BooleanField | forms.NullBooleanField):
        try:
            value = field.clean(raw)
        except ValidationError:
            return _raw(raw)
        return "“unknown”" if value is None else ("“yes”" if value else "“no”")
    if isinstance(field, forms.ChoiceField):
        items = raw if isinstance(raw, list | tuple) else [raw]
        labels = [_choice_label(field, item) for item in items]
        return ", ".join(_quoted(label) if label is not None else _raw(item)
                         for label, item in zip(labels, items, strict=True)) or "none"
    if isinstance(raw, list | tuple):
        raw = raw[0] if len(raw) == 1 else raw
    return _raw(raw)


def _arguments_in_words(arguments: dict[str, Any], skip: Iterable[str] = (), *,
                        labels: dict[str, str] | None = None, fields: dict[str, forms.Field] | None = None) -> str:
    parts = []
    for key, value in arguments.items():
        if key in skip:
            continue
        field = (fields or {}).get(key)
        label = (labels or {}).get(key) or _label(field, key)
        parts.append(f"{label} {_display(field, value, look_up=False)}")
    return ", ".join(parts)


# "Id of the project." or "Id of the task to comment on." names a project, a task.
_ID_OF = re.compile(r"^(?:the )?id of (?:the |a |an )?(?P<noun>[\w ]{1,40}?)"
                    r"(?: (?:to|that|which|whose|for|in|on) [^.]*)?\.?$", re.IGNORECASE)


def _identity(definition: ViewTool | ReadTool, url_kwargs: dict[str, Any]) -> str:
    """The object the address names, as the model named it: "the project #7" (nothing looked up)."""
    if not url_kwargs:
        return ""
    model = definition.model
    parts = []
    for key, value in url_kwargs.items():
        shown = f"#{value}" if isinstance(value, int) or str(value).isdigit() else _quoted(str(value))
        # A function view's argument may name another object than the view's model (a comment form's view
        # takes the task's id): its description says which ("Id of the task to comment on.").
        said = None if getattr(definition, "is_class_view", True) else _ID_OF.match(
            getattr(definition, "descriptions", {}).get(key, "").strip())
        if said:
            noun = said.group("noun").lower()
        elif model is not None:
            noun = _verbose(model)
        else:
            noun = key.replace("_", " ")
        parts.append(f"the {noun} {shown}")
    return ", ".join(parts)


def _with(sentence: str, details: str, separator: str = ": ") -> str:
    return f"{sentence}{separator}{details}" if details else sentence


# --- what each kind of view says ----------------------------------------------------------------------


def _deletion_counts(obj: models.Model) -> tuple[list[str], bool]:
    """What deleting `obj` takes with it, counted by kind ("4 tasks"), and whether something protects it.
    Django's own deletion collector, as the admin's delete page uses it; it only reads."""
    collector = Collector(using=router.db_for_write(type(obj), instance=obj), origin=obj)
    try:
        collector.collect([obj])
    except (ProtectedError, RestrictedError):
        return [], True
    counts: Counter[type[models.Model]] = Counter()
    for model, instances in collector.data.items():
        counts[model] += len(instances)
    for batch in collector.fast_deletes:
        counts[batch.model] += batch.count() if isinstance(batch, models.QuerySet) else len(batch)
    counts[type(obj)] -= 1  # the object itself
    parts = []
    for model, count in counts.items():
        if count <= 0 or model._meta.auto_created:  # a many-to-many link is no object a person sees
            continue
        parts.append(f"{count} {_verbose(model, plural=count != 1)}")
    return parts, False


def _delete_words(obj: models.Model) -> str:
    sentence = f"Delete the {_verbose(type(obj))} {_quoted(_name(obj))}"
    cascade, protected = _deletion_counts(obj)
    if protected:
        return f"{sentence} — other records still depend on it, so the deletion will most likely fail"
    return f"{sentence} and its {_and(cascade)}" if cascade else sentence


def _current_values(form: forms.BaseForm, submitted: dict[str, Any]) -> QueryDict:
    """The form's current values (what an update keeps), overlaid with what the call submits, as the
    executor posts them for a partial update."""
    data = QueryDict(mutable=True)
    for name, field in form.fields.items():
        if name not in submitted:
            data.setlist(name, _form_value(field.prepare_value(form[name].initial)))
    for name, value in submitted.items():
        data.setlist(name, _form_value(value))
    return data


def _form_words(view: Any, request: HttpRequest, submitted: dict[str, Any], *, partial: bool) -> tuple[
        forms.BaseForm | None, list[tuple[str, str]]]:
    """The view's own form as the person (`get_form()`), bound to what the call submits, and each submitted
    field as (label, value in words); for an update only the fields whose value changes."""
    if request.method not in ("POST", "PUT"):
        return None, []
    form = view.get_form()
    if partial:
        request.POST = _current_values(form, submitted)  # type: ignore[assignment]
        form = view.get_form()
        names = [name for name in form.changed_data if name in submitted]
    else:
        names = [name for name in form.fields if name in submitted]
    if getattr(request, CHECK_FORM, None) is not None:
        # Asked to check the values too (`check_call`): what the form says of each submitted field, and of the whole.
        getattr(request, CHECK_FORM).update({
            name: " ".join(str(message) for message in messages) for name, messages in form.errors.items()
            if name in submitted or name == NON_FIELD_ERRORS})
    return form, [(_label(form.fields[name], name), _display(form.fields[name], form[name].data, look_up=True))
                  for name in names]


def _update_words(view: Any, request: HttpRequest, submitted: dict[str, Any], obj: models.Model) -> str:
    sentence = f"Change the {_verbose(type(obj))} {_quoted(_name(obj))}"
    form, changes = _form_words(view, request, submitted, partial=True)
    if form is None:
        return _with(sentence, _arguments_in_words(submitted))
    if not changes:
        return f"{sentence}: nothing would change (the values given are its current ones)"
    return f"{sentence}: " + ", ".join(f"{label} to {value}" for label, value in changes)


def _create_words(view: Any, request: HttpRequest, submitted: dict[str, Any], model: type[models.Model] | None
                  ) -> str:
    form, _words = _form_words(view, request, submitted, partial=False)
    model = getattr(getattr(form, "_meta", None), "model", None) or model  # a ModelForm knows what it creates
    noun = _verbose(model)
    sentence = f"Create {_article(noun)} {noun}"
    if form is None:
        return _with(sentence, _arguments_in_words(submitted))
    fields = form.fields
    named = next((name for name, field in fields.items() if name in submitted
                  and type(field) is forms.CharField and not isinstance(field.widget, forms.Textarea)), None)
    if named is not None:
        sentence += f" {_quoted(str(form[named].data or ''))}"
    container = next((name for name, field in fields.items() if name in submitted and field.required
                      and isinstance(field, forms.ModelChoiceField)
                      and not isinstance(field, forms.ModelMultipleChoiceField)), None)
    if container is not None:
        related = getattr(fields[container], "queryset", None)
        shown = _display(fields[container], form[container].data, look_up=True)
        sentence += f" in the {_verbose(related.model if related is not None else None)} {shown}"
    rest = [f"{_label(fields[name], name)} {_display(fields[name], form[name].data, look_up=True)}"
            for name in fields if name in submitted and name not in (named, container)]
    return _with(sentence, ", ".join(rest))


def _class_view_words(definition: ViewTool, view: Any, request: HttpRequest, submitted: dict[str, Any]) -> str:
    """Inside the view's own dispatch, as the person: its object and form, in words."""
    sentence = first_sentence(definition.description, definition.name)
    if isinstance(view, DeletionMixin) and isinstance(view, SingleObjectMixin):
        obj = view.object = view.get_object()  # as the view's own post() sets it
        return _delete_words(obj)
    if isinstance(view, BaseUpdateView):
        view.object = view.get_object()
        return _update_words(view, request, submitted, view.object)
    if isinstance(view, BaseCreateView):
        view.object = None
        return _create_words(view, request, submitted, definition.model)
    if isinstance(view, SingleObjectMixin):
        obj = view.object = view.get_object()  # type: ignore[attr-defined]  # as the view's own get() sets it
        shown = f"the {_verbose(type(obj))} {_quoted(_name(obj))}"
        return _with(f"{sentence} — {shown}", _arguments_in_words(submitted), ", ")
    if isinstance(view, FormMixin):
        _form, words = _form_words(view, request, submitted, partial=False)
        return _with(sentence, ", ".join(f"{label} {value}" for label, value in words))
    return _with(sentence, _arguments_in_words(submitted))


# --- the lookup, as the person ------------------------------------------------------------------------


def _unchecked_words(definition: ViewTool | ReadTool, arguments: dict[str, Any], url_kwargs: dict[str, Any],
                     why: Unseen) -> str:
    """What the call will do from its arguments alone: nothing looked up, nothing the model did not send."""
    model = definition.model
    view = getattr(definition, "view", None)
    identity = _identity(definition, url_kwargs)
    rest = {key: value for key, value in arguments.items() if key not in url_kwargs}
    form_class = getattr(definition, "form_class", None) if isinstance(definition, ViewTool) else None
    if form_class is None and isinstance(definition, ViewTool) and definition.is_class_view:
        try:
            form_class = definition.declared_form_class()
        except Exception:  # a form that cannot be built without a request: labels from the arguments' names
            form_class = None
    fields = dict(getattr(form_class, "base_fields", {}) or {})
    details = _arguments_in_words(rest, fields=fields)
    if isinstance(view, type) and issubclass(view, DeletionMixin):
        sentence = f"Delete {identity}" if identity else f"Delete {_article(_verbose(model))} {_verbose(model)}"
    elif isinstance(view, type) and issubclass(view, BaseUpdateView):
        sentence = f"Change {identity}" if identity else f"Change {_article(_verbose(model))} {_verbose(model)}"
    elif isinstance(view, type) and issubclass(view, BaseCreateView):
        sentence = f"Create {_article(_verbose(model))} {_verbose(model)}"
    else:
        sentence = first_sentence(definition.description, definition.name)
        details = ", ".join(part for part in (identity, details) if part)
    sentence = _with(sentence, details)
    return f"{sentence} — {why.value}." if why.value else sentence


def _lookup_as_person(definition: ViewTool, match: ResolverMatch, arguments: dict[str, Any],
                      submitted: dict[str, Any]) -> Callable[..., HttpResponse]:
    """The innermost call of the lookup's request: where the view would run, after every middleware."""
    found: dict[str, Any] = {}

    def lookup(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            with transaction.atomic():  # a database error here must not break the middleware's way out
                found["text"] = _describe_in_request(definition, match, request, arguments, submitted)
        except Http404:
            found["why"] = Unseen.NOT_FOUND
        except PermissionDenied:
            found["why"] = Unseen.DENIED
        except _Refused as refused:
            found["why"] = refused.why
        except Exception:
            logger.exception("Assistant tool %r: its approval could not be described as the person; it is "
                             "described without the object", definition.name)
            found["why"] = Unseen.ERROR
        return HttpResponse(status=204)

    # The middleware sees the tool's own view (its markers: csrf_exempt, login_required, view_class, ...), as
    # for the call; private attributes (a coroutine marker among them) stay the lookup's own.
    functools.update_wrapper(lookup, match.func, assigned=("__module__", "__name__", "__qualname__", "__doc__"),
                             updated=())
    for key, value in vars(match.func).items():
        if not key.startswith("_"):
            setattr(lookup, key, value)
    lookup.found = found  # type: ignore[attr-defined]
    return lookup


def _describe_in_request(definition: ViewTool, match: ResolverMatch, request: HttpRequest,
                         arguments: dict[str, Any], submitted: dict[str, Any]) -> str:
    if definition.describe is not None:
        text = definition.describe(request, **arguments)
        if isinstance(text, str) and text.strip():
            return text
    view_class = getattr(match.func, "view_class", None)
    if view_class is None or getattr(match.func, "__code__", None) is not _AS_VIEW_CODE:
        # A function view (its checks run only inside it), or a class view decorated in the URLconf.
        raise _Refused(Unseen.UNCHECKED)
    view = view_class(**getattr(match.func, "view_initkwargs", {}))
    view.setup(request, *match.args, **match.kwargs)
    words: dict[str, str] = {}

    def handler(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        words["text"] = _class_view_words(definition, view, request, submitted)
        return HttpResponse(status=204)

    # The view's own dispatch (access mixins, method decorators, its own checks) reaches this handler in
    # place of the one that would act.
    setattr(view, request.method.lower(), handler)  # type: ignore[union-attr]
    response = view.dispatch(request, *match.args, **match.kwargs)
    if "text" in words:
        return words["text"]
    code = getattr(response, "status_code", 500)
    raise _Refused(Unseen.NOT_FOUND if code in (404, 410) else Unseen.DENIED if code in (302, 401, 403)
                   else Unseen.REFUSED)


#: The request attribute that asks the view's form to check the values it describes: the dict its errors go in.
CHECK_FORM = "_assistant_form_errors"


def _describe(user: Any, tool: Tool, arguments: dict[str, Any], sent_from: SentFrom | None,
              form_errors: dict[str, str] | None = None) -> str:
    definition = tool.definition
    if isinstance(definition, ReadTool):
        return _with(first_sentence(definition.description, definition.name), _arguments_in_words(arguments))
    binding = registry.binding(definition)
    url_kwargs = {key: arguments[key] for key in (binding.converters if binding else {}) if key in arguments}
    if binding is None or validate_arguments(arguments, parameters_of(definition)):
        return _unchecked_words(definition, arguments, url_kwargs, Unseen.INVALID)
    try:
        path = unquote(reverse(binding.url_name, kwargs=url_kwargs))
    except NoReverseMatch:
        return _unchecked_words(definition, arguments, url_kwargs, Unseen.NOWHERE)
    match = own_match(definition, binding, path, url_kwargs)
    if match is None:
        return _unchecked_words(definition, arguments, url_kwargs, Unseen.NOWHERE)
    submitted = {key: value for key, value in arguments.items()
                 if key not in url_kwargs and key not in binding.annotations}
    data = QueryDict(mutable=True)
    for key, value in submitted.items():
        data.setlist(key, _form_value(value))
    request = build_request(person=user, sent_from=sent_from, method=definition.method, path=path, data=data,
                            tool_name=definition.name)
    if form_errors is not None:
        setattr(request, CHECK_FORM, form_errors)
    lookup = _lookup_as_person(definition, match, arguments, submitted)
    target = ResolverMatch(lookup, match.args, match.kwargs, url_name=match.url_name,
                           app_names=list(match.app_names), namespaces=list(match.namespaces), route=match.route)
    with transaction.atomic():  # whatever the lookup or a middleware writes is undone
        _response, outcome = _sent(definition.name, request, target)
        transaction.set_rollback(True)
    found: dict[str, Any] = lookup.found  # type: ignore[attr-defined]
    if outcome is not None:
        return _unchecked_words(definition, arguments, url_kwargs,
                                Unseen.SESSION if outcome.session_ended else Unseen.REFUSED)
    if "text" in found:
        return str(found["text"])
    return _unchecked_words(definition, arguments, url_kwargs, found.get("why", Unseen.ERROR))


def check_call(user: Any, tool: Tool, arguments: dict[str, Any], *, sent_from: SentFrom | None = None
               ) -> tuple[str, dict[str, str]]:
    """The approval card's sentence for this call, as `describe_call` says it, and what the view's own form, bound
    as the person to these values, says is wrong with them (by field; `__all__` for the whole), looked up in the same
    rolled-back request: {} when it accepts them or the view has no form to ask. Never raises."""
    form_errors: dict[str, str] = {}
    return describe_call(user, tool, arguments, sent_from=sent_from, form_errors=form_errors), form_errors


def describe_call(user: Any, tool: Tool, arguments: dict[str, Any], *, sent_from: SentFrom | None = None,
                  form_errors: dict[str, str] | None = None) -> str:
    """The approval card's sentence for this call of `tool` by `user`, looked up as them with the session
    `sent_from` (see the module's notes). At most MAX_SUMMARY_CHARS characters; never raises. `form_errors`: see
    `check_call`."""
    try:
        text = _describe(user, tool, arguments, sent_from, form_errors)
    except Exception:
        logger.exception("Assistant tool %r: its approval could not be described", tool.name)
        try:
            text = _unchecked_words(tool.definition, arguments, {}, Unseen.ERROR)
        except Exception:
            text = f"{first_sentence(tool.description, tool.name)} — {Unseen.ERROR.value}."
    return _clip(text, MAX_SUMMARY_CHARS)
