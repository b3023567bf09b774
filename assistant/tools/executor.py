"""Firing a tool: the view is resolved through the URL resolver and sent a request through the site's own
middleware, made with the session the person's message came from (assistant/tools/request.py), so the
site's gates, the view's decorators and its own queryset scoping decide, as in the browser.

Nothing here is reachable over HTTP: the only way in is a Python call from the run loop. The outcome
is read from the response (redirect, form errors, 403, 404, JSON, the declared fields of the objects of
a list/detail view); a page it cannot read is an `error` that says so, with a logged warning naming the
view and the fix, never an empty answer. It never raises: a crashing view becomes an `error` outcome
and its writes are rolled back. A call whose session has ended never reaches the view: its outcome says
so (`session_ended`).
"""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import typing
import uuid
from collections.abc import Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    ObjectDoesNotExist,
    PermissionDenied,
    SuspiciousOperation,
    ValidationError,
)
from django.db import models, transaction
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, Resolver404, ResolverMatch, resolve, reverse
from django.views.generic.edit import DeletionMixin

from assistant.access.authority import SentFrom
from assistant.conf import assistant_settings
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.offer import parameters_of, refusal, resolve_scope
from assistant.tools.pages import FIELDS_FIX, READ_FIX, WRITE_FIX
from assistant.tools.provenance import others_text, unknown_text
from assistant.tools.reads import OTHERS_TEXT, jsonable, run_read
from assistant.tools.registry import Binding, _where, own_match, registry
from assistant.tools.request import ToolCallState, acts_as_person, build_request, send
from assistant.tools.shows import shown_object
from assistant.tools.validation import validate_arguments

logger = logging.getLogger(__name__)

STATUSES = ("done", "data", "invalid", "denied", "not_found", "error")
#: A spec of every declared tool: reading what the person has open is theirs whichever spec a chat is under.
ANY_TOOL = {"tools": "__all__"}


@dataclass
class ToolOutcome:
    """What came of one tool call. `status` is one of STATUSES; `reason` says why when nothing happened."""

    tool: str
    status: str
    took_effect: bool = False
    reason: str = ""
    data: Any = field(default=None)
    # The session the call was made with has ended: nothing was done, and the run must stop acting.
    session_ended: bool = False
    # Text in the answer written by anyone but the person: who wrote it, which objects, where it was read
    # (assistant/tools/provenance.py). Empty: only the person's own text and the site's values.
    others_text: list[dict[str, Any]] = field(default_factory=list)

    def to_model(self) -> dict[str, Any]:
        """A compact, JSON-serialisable answer to hand back to the model."""
        answer: dict[str, Any] = {"status": self.status, "took_effect": self.took_effect}
        if self.reason:
            answer["reason"] = self.reason
        if self.data not in (None, {}, []):
            answer["data"] = self.data
        if self.others_text:
            answer[OTHERS_TEXT] = self.others_text
        return answer


def invalid_arguments(tool: str, errors: dict[str, str]) -> ToolOutcome:
    """The outcome of a call whose arguments do not fit its tool: the problems by argument name, for the model
    (or the person's own agent) to correct."""
    return ToolOutcome(tool, "invalid", reason="the arguments do not fit this tool; fix the named ones",
                       data={"errors": errors})


SESSION_ENDED_REASON = "the session this was asked from has ended (signed out); nothing was done"

# The session of the call in progress (set by `execute_tool`), so every request the call makes carries it
# without widening each internal signature between the entry point and the request.
_sent_from: ContextVar[SentFrom | None] = ContextVar("assistant_tool_sent_from", default=None)


def _internal_request(user: Any, method: str, path: str, data: QueryDict, tool_name: str) -> HttpRequest:
    """The request for one tool call, as the person's browser would send it (see tools/request.py)."""
    return build_request(person=user, sent_from=_sent_from.get(), method=method, path=path, data=data,
                         tool_name=tool_name)


def _form_value(value: Any) -> list[str]:
    """How a browser would send this value in a form post."""
    if value is None:
        return [""]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, list | tuple | set):
        return [item for entry in value for item in _form_value(entry)]
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return [value.isoformat()]
    if isinstance(value, models.Model):
        return [str(value.pk)]
    return [str(value)]


def _coerce(value: Any, annotation: Any) -> Any:
    """A JSON value as the Python type a function view's typed keyword parameter declares."""
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin in (list, tuple, set, frozenset) and args:
        return [_coerce(item, args[0]) for item in value]
    if args and origin is not typing.Literal:
        return _coerce(value, args[0])
    converters: dict[Any, Any] = {
        datetime.date: datetime.date.fromisoformat, datetime.datetime: datetime.datetime.fromisoformat,
        decimal.Decimal: lambda v: decimal.Decimal(str(v)), uuid.UUID: uuid.UUID, float: float,
    }
    return converters[annotation](value) if annotation in converters else value


def _summary(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _messages(request: HttpRequest) -> list[dict[str, str]]:
    return [{"level": m.level_tag, "text": str(m.message)} for m in request._messages]  # type: ignore[attr-defined]


def _jsonable(value: Any) -> Any:
    if isinstance(value, models.Model):
        return value.pk
    if hasattr(value, "all") and callable(value.all):  # a related manager
        return [item.pk for item in value.all()[: assistant_settings.READ_LIMIT_MAX]]
    return jsonable(value)


class _Missing(Exception):
    """A declared field the object does not have (a misspelling, or a name of another model)."""


def _field_value(obj: Any, name: str) -> Any:
    value = obj
    for part in name.split("__"):
        if value is None:
            return None  # an empty relation on the way: the field is there, its value is None
        if isinstance(value, Mapping):  # a row of .values()
            if part not in value:
                raise _Missing(name)
            value = value[part]
            continue
        try:
            value = getattr(value, part)
        except ObjectDoesNotExist:  # an empty one-to-one relation: there, and empty
            return None
        except AttributeError:
            raise _Missing(name) from None
    return value


def _declared_fields(obj: Any, names: list[str], missing: set[str]) -> dict[str, Any]:
    """The declared fields of one object; names it does not have are added to `missing`."""
    row: dict[str, Any] = {}
    for name in names:
        try:
            row[name] = _jsonable(_field_value(obj, name))
        except _Missing:
            missing.add(name)
    return row


def _form_errors(form: Any) -> dict[str, list[str]]:
    return {name: [item["message"] for item in items] for name, items in form.errors.get_json_data().items()}


# What the model hears when a view's answer holds nothing it can read. The fix is the developer's, so it
# goes to the log (see _unreadable); the model only needs to know it got nothing and that retrying is futile.
UNREADABLE_PAGE = ("the view answered with a page meant for a browser, which cannot be read as data, so this tool "
                   "gave no answer; calling it again will not help")
UNREADABLE_WRITE = ("the view answered with a page instead of redirecting, so whether it worked (or why not) cannot "
                    "be told; nothing was kept (any change it made was undone)")


def _unreadable(definition: ViewTool, why: str, fix: str) -> None:
    """Tell the developer, in the log, which view gave the model nothing and how to fix it."""
    logger.warning("Assistant tool %r (view %s): %s, so the model was told it got no answer. To fix: %s.",
                   definition.name, _where(definition), why, fix)


def _read_answer(definition: ViewTool, request: HttpRequest, response: HttpResponse) -> ToolOutcome:
    """A read view's page: the declared fields of the object(s) in its context, or a clear "unreadable"."""
    name, fields = definition.name, definition.fields
    context = getattr(response, "context_data", None)
    if response.status_code == 204 or (context is None and not response.streaming and not response.content):
        return ToolOutcome(name, "data", data={"messages": _messages(request)})  # nothing to show, said plainly
    if context is None:
        _unreadable(definition, f"its GET answered {response.status_code} with a plain rendered page (render() or "
                    "an HttpResponse), which has no context to read", READ_FIX)
    elif fields is None:
        has = [key for key in ("object_list", "object") if context.get(key) is not None]
        shown = f"its page's context has {' and '.join(repr(k) for k in has)} but " if has else ""
        _unreadable(definition, f"{shown}@tool declares no fields=, so nothing on the page may be shown",
                    FIELDS_FIX if has else READ_FIX)
    elif "object_list" in context or context.get("object") is not None:
        missing: set[str] = set()
        if "object_list" in context:
            limit = assistant_settings.READ_LIMIT_MAX
            fetched = list(context["object_list"][: limit + 1])
            objects = fetched[:limit]
            rows = [_declared_fields(obj, fields, missing) for obj in objects]
            # A paginated view's object_list is one page of it: more pages are rows the model did not get.
            page = context.get("page_obj")
            more_pages = bool(page is not None and callable(getattr(page, "has_next", None)) and page.has_next())
            data: dict[str, Any] = {"results": rows, "truncated": len(fetched) > limit or more_pages}
        else:
            objects = [context["object"]]
            rows = [data := _declared_fields(context["object"], fields, missing)]
        if not missing:
            return ToolOutcome(name, "data", data=data,
                               others_text=_objects_text(request.user, name, objects, rows, fields))
        named = ", ".join(repr(n) for n in sorted(missing))
        _unreadable(definition, f"fields= names {named}, which its page's object does not have",
                    "name fields of the object's model (following relations with '__') in @tool(fields=[...])")
        return ToolOutcome(name, "error", reason=f"this tool is set up to show field(s) {named} that the page's "
                           "object does not have, so it gave no answer; calling it again will not help")
    else:
        _unreadable(definition, "its page's context has neither 'object' nor 'object_list', so the declared "
                    "fields= have nothing to be read from", "put the object(s) in the context as 'object' or "
                    "'object_list' (a DetailView or ListView does), return a JsonResponse, or declare a "
                    "readable(Model, fields=..., scope=...) read instead")
    messages = _messages(request)
    return ToolOutcome(name, "error", reason=UNREADABLE_PAGE, data={"messages": messages} if messages else None)


def _objects_text(user: Any, where: str, objects: list[Any], rows: list[dict[str, Any]], fields: list[str]
                  ) -> list[dict[str, Any]]:
    """Whose text the declared fields of a page's objects carry (rows that are not model instances: nobody
    can say whose, so someone else's when they hold text)."""
    sources: list[dict[str, Any]] = []
    by_model: dict[type[models.Model], list[tuple[Any, dict[str, Any]]]] = {}
    for obj, row in zip(objects, rows, strict=True):
        if isinstance(obj, models.Model):
            by_model.setdefault(type(obj), []).append((obj.pk, row))
        elif _holds_text(row) and not sources:
            sources.append(unknown_text(where))
    for model, model_rows in by_model.items():
        sources.extend(others_text(user, model, model_rows, fields, where=where))
    return sources


def _is_json(response: HttpResponse) -> bool:
    """application/json, or any structured `+json` type (application/problem+json, application/ld+json...)."""
    media_type = response.get("Content-Type", "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (media_type.startswith("application/") and media_type.endswith("+json"))


def _interpret(definition: ViewTool, request: HttpRequest, response: HttpResponse) -> ToolOutcome:
    """Read the view's answer the way a person reads the page it would have shown."""
    name, writes, code = definition.name, definition.method == "POST", response.status_code
    if 300 <= code < 400 and response.has_header("Location"):
        target = response["Location"]
        if urlsplit(target).path == urlsplit(resolve_url(settings.LOGIN_URL)).path:
            return ToolOutcome(name, "denied", reason="the view asked for a login: you may not do this")
        status = "done" if writes else "data"
        return ToolOutcome(name, status, writes, data={"redirect": target, "messages": _messages(request)})
    if code == 403:
        return ToolOutcome(name, "denied", reason="permission denied")
    if code in (404, 410):
        return ToolOutcome(name, "not_found", reason="not found")
    if code == 405:
        return ToolOutcome(name, "invalid", reason=f"this view does not accept {definition.method}")
    if code >= 500:
        return ToolOutcome(name, "error", reason=f"the view answered {code}")
    if code >= 400:
        return ToolOutcome(name, "invalid", reason=f"the view rejected the request ({code})")
    if _is_json(response):
        payload = json.loads(response.content or b"null")
        return ToolOutcome(name, "done" if writes else "data", writes, data=payload)
    if not writes:
        return _read_answer(definition, request, response)
    context = getattr(response, "context_data", None) or {}
    form = context.get("form")
    if form is not None and form.is_bound and form.errors:
        return ToolOutcome(name, "invalid", reason="the form has errors; fix the named arguments",
                           data={"errors": _form_errors(form), "messages": _messages(request)})
    if code == 204:
        return ToolOutcome(name, "done", True, data={"messages": _messages(request)})
    # No redirect and no readable form: nothing tells whether it worked, so it is rolled back (by the
    # caller), and the messages the view added are not passed on: they may announce what was undone.
    kind = "a TemplateResponse with no form errors" if getattr(response, "context_data", None) is not None \
        else "a plain rendered page (render() or an HttpResponse)"
    _unreadable(definition, f"its POST answered {code} with {kind} instead of a redirect; its changes were "
                "rolled back", WRITE_FIX)
    return ToolOutcome(name, "error", reason=UNREADABLE_WRITE)


def _exception_outcome(name: str, exc: BaseException) -> ToolOutcome:
    if isinstance(exc, Http404):
        return ToolOutcome(name, "not_found", reason="not found")
    if isinstance(exc, PermissionDenied):
        return ToolOutcome(name, "denied", reason="permission denied")
    if isinstance(exc, BadRequest | SuspiciousOperation | ValidationError):
        return ToolOutcome(name, "invalid", reason=_summary(exc))
    return ToolOutcome(name, "error", reason=f"the view failed ({_summary(exc)})")


def _gate_outcome(name: str, response: HttpResponse) -> ToolOutcome:
    """The site's middleware answered in the view's place: nothing was done, and the model hears why."""
    code = response.status_code
    if 300 <= code < 400:
        target = response.get("Location", "")
        if urlsplit(target).path == urlsplit(resolve_url(settings.LOGIN_URL)).path:
            return ToolOutcome(name, "denied", reason="the site asked for a login: you may not do this")
        return ToolOutcome(name, "denied", reason=f"the site sent this request to {target[:200]} before the action "
                           "ran (a verification step, for example); nothing was done")
    if code in (401, 403):
        return ToolOutcome(name, "denied", reason=f"the site refused the request ({code}); nothing was done")
    if code in (404, 410):
        return ToolOutcome(name, "not_found", reason="not found")
    if code >= 500:
        return ToolOutcome(name, "error", reason=f"the site answered {code} before the action ran; nothing was done")
    return ToolOutcome(name, "invalid", reason=f"the site answered {code} in place of the action; nothing was done")


def _sent(name: str, request: HttpRequest, target: ResolverMatch) -> tuple[HttpResponse | None, ToolOutcome | None]:
    """Send the request through the middleware to `target`. Returns the view's response, or the outcome
    when the view did not answer: the session ended, the view raised, or a middleware answered instead."""
    state: ToolCallState = request.assistant_call  # type: ignore[attr-defined]
    state.target = target
    try:
        response = send(request)
    except Exception as exc:  # only when the site propagates exceptions (DEBUG_PROPAGATE_EXCEPTIONS)
        state.exception = state.exception or exc
        response = HttpResponse(status=500)
    if state.session_ended or (state.sent_from is not None and not state.reached
                               and not acts_as_person(request, state)):
        return None, ToolOutcome(name, "denied", reason=SESSION_ENDED_REASON, session_ended=True)
    if state.exception is not None and response.status_code >= 400:
        return None, _exception_outcome(name, state.exception)
    if not state.reached:
        return None, _gate_outcome(name, response)
    return response, None


def _with_extra(match: ResolverMatch, extra: dict[str, Any]) -> ResolverMatch:
    """The resolved view, also passed the typed keyword parameters a function view declares."""
    if not extra:
        return match
    app_names: list[str | None] = list(match.app_names)
    namespaces: list[str | None] = list(match.namespaces)
    return ResolverMatch(match.func, match.args, {**match.kwargs, **extra}, url_name=match.url_name,
                         app_names=app_names, namespaces=namespaces, route=match.route, tried=match.tried)


def _call(definition: ViewTool, match: ResolverMatch, request: HttpRequest, extra: dict[str, Any],
          user: Any = None, arguments: dict[str, Any] | None = None) -> ToolOutcome:
    # A page that deletes its object names it in its answer after it is gone: whose it was is read first.
    deleting = (definition.method == "POST" and definition.is_class_view
                and issubclass(definition.view, DeletionMixin))
    before = _subject_text(user, definition.name, match) if deleting else None
    response, outcome = _sent(definition.name, request, _with_extra(match, extra))
    if outcome is not None:
        return outcome
    assert response is not None
    outcome = _interpret(definition, request, response)
    if not outcome.others_text and _carries_text(outcome, response, _strings(arguments or {})):
        outcome.others_text = before if before is not None else _answer_text(user, definition.name, match, outcome)
    return outcome


def _carries_text(outcome: ToolOutcome, response: HttpResponse, sent: set[str]) -> bool:
    """Whether a view's answer holds words of the page beyond the site's values and what was sent: its messages,
    or text of a JSON answer other than the call's own arguments given back (a redirect's address and a form's
    errors are the site's, or the sender's)."""
    if _is_json(response):
        return _holds_text(outcome.data, sent)
    messages = outcome.data.get("messages") if isinstance(outcome.data, dict) else None
    return bool(messages)


def _holds_text(value: Any, sent: Collection[str] = ()) -> bool:
    if isinstance(value, str):
        return bool(value.strip()) and value not in sent
    if isinstance(value, dict):
        return any(_holds_text(item, sent) for item in value.values())
    if isinstance(value, list):
        return any(_holds_text(item, sent) for item in value)
    return False


def _strings(value: Any) -> set[str]:
    """The strings among a call's arguments: given back in its answer, they are the caller's own."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {text for item in value.values() for text in _strings(item)}
    if isinstance(value, list | tuple):
        return {text for item in value for text in _strings(item)}
    return set()


def _subject_text(user: Any, where: str, match: ResolverMatch) -> list[dict[str, Any]] | None:
    """Whose text the object a view shows or acts on (by its URL) carries; None when nothing says which it is."""
    found = shown_object(match.func, match.kwargs)
    if found is None:
        return None
    model, lookup, value = found
    pk = value if lookup == "pk" else model._default_manager.filter(**{lookup: value}).values_list(
        "pk", flat=True).first()
    if pk is None or not model._default_manager.filter(pk=pk).exists():
        return None
    return others_text(user, model, [(pk, None)], (), where=where)


def _answer_text(user: Any, where: str, match: ResolverMatch, outcome: ToolOutcome) -> list[dict[str, Any]]:
    """Whose words a view's answer carries: those of the object it acted on, or of the page it sent the person
    to. When neither is known, a JSON answer's text is someone else's (nobody can say otherwise); the messages
    of a page that names no object are taken as the site's own."""
    found = _subject_text(user, where, match)
    target = (outcome.data or {}).get("redirect") if isinstance(outcome.data, dict) else None
    if found is None and isinstance(target, str):
        try:
            landed = resolve(urlsplit(target).path)
        except Resolver404:
            landed = None
        if landed is not None:
            found = _subject_text(user, where, landed)
    if found is not None:
        return found
    if not isinstance(outcome.data, dict) or "redirect" in outcome.data or set(outcome.data) == {"messages"}:
        # Messages of a page that names no object: the site's own words (and what the call sent).
        return []
    return [unknown_text(where)]


def _current_values(
    definition: ViewTool, match: ResolverMatch, user: Any, path: str, extra: dict[str, Any]
) -> dict[str, list[str]] | ToolOutcome:
    """An update form's current values, read by showing the form (GET) as the user; an outcome if
    the user may not see it."""
    request = _internal_request(user, "GET", path, QueryDict(mutable=True), definition.name)
    probe = ViewTool(name=definition.name, description="", view=definition.view, method="GET")
    response, outcome = _sent(definition.name, request, _with_extra(match, extra))
    if outcome is not None:
        # A crash happens again in the POST, which classifies it; a refusal is the answer now.
        return outcome if outcome.status in {"denied", "not_found"} else {}
    assert response is not None
    form = (getattr(response, "context_data", None) or {}).get("form")
    if 200 <= response.status_code < 300:
        if form is None:
            return {}  # no form to read current values from: the POST decides, and its outcome says
    else:  # the refusals (a login redirect, 403, 404) are read as any answer is
        outcome = _interpret(probe, request, response)
        return outcome if outcome.status in {"denied", "not_found"} else {}
    return {name: _form_value(form[name].value()) for name in form.fields}


def _reads_path() -> str:
    """Declared reads have no view of their own; their request is one to the assistant's page."""
    try:
        return reverse("assistant:page")
    except NoReverseMatch:
        return "/"


def _read(definition: ReadTool, user: Any, arguments: dict[str, Any]) -> ToolOutcome:
    """A declared read, through the same middleware as a view, for the request's user."""
    request = _internal_request(user, "GET", _reads_path(), QueryDict(mutable=True), definition.name)
    rows: dict[str, Any] = {}

    def read(request: HttpRequest) -> HttpResponse:
        rows["data"] = run_read(definition, request.user, arguments)
        return HttpResponse(status=204)

    _response, outcome = _sent(definition.name, request, ResolverMatch(read, (), {}, url_name=definition.name))
    if outcome is not None:
        return outcome
    data = rows["data"]
    return ToolOutcome(definition.name, "data", data=data, others_text=data.pop(OTHERS_TEXT, []))


def _dispatch(definition: ViewTool, binding: Binding, user: Any, arguments: dict[str, Any]) -> ToolOutcome:
    url_kwargs = {key: arguments[key] for key in binding.converters}
    extra = {key: _coerce(arguments[key], hint) for key, hint in binding.annotations.items() if key in arguments}
    submitted = {key: value for key, value in arguments.items() if key not in url_kwargs and key not in extra}
    try:
        # Decoded, as a server hands a request's path to Django (reverse() returns it %-encoded).
        path = unquote(reverse(binding.url_name, kwargs=url_kwargs))
    except NoReverseMatch:
        return ToolOutcome(definition.name, "invalid", reason="the address arguments do not form a valid address",
                           data={"errors": {key: ["not a valid value here"] for key in url_kwargs}})
    match = own_match(definition, binding, path, url_kwargs)
    if match is None:
        logger.warning("Assistant tool %s: the address %r does not resolve to its own view with these arguments; "
                       "an overlapping URL pattern catches it", definition.name, path)
        return ToolOutcome(
            definition.name, "invalid",
            reason="the address these arguments make leads to another view, or to this one with other "
                   "arguments; nothing was run",
            data={"errors": {key: ["not a valid value here"] for key in url_kwargs}} if url_kwargs else None,
        )
    if definition.method == "GET":
        data = QueryDict(mutable=True)
        for key, value in submitted.items():
            data.setlist(key, _form_value(value))
        return _call(definition, match, _internal_request(user, "GET", path, data, definition.name), extra, user,
                     arguments)
    with transaction.atomic():
        values: dict[str, list[str]] = {}
        if definition.partial:
            current = _current_values(definition, match, user, path, extra)
            if isinstance(current, ToolOutcome):
                return current
            values.update(current)
        else:
            properties = binding.parameters.get("properties", {})
            values.update({key: _form_value(prop["default"]) for key, prop in properties.items()
                           if "default" in prop and key not in url_kwargs})
        values.update({key: _form_value(value) for key, value in submitted.items()})
        data = QueryDict(mutable=True)
        for key, items in values.items():
            data.setlist(key, items)
        outcome = _call(definition, match, _internal_request(user, "POST", path, data, definition.name), extra,
                        user, arguments)
        if not outcome.took_effect:
            transaction.set_rollback(True)
    return outcome


def _execute(user: Any, name: Any, arguments: Any, spec: Any, profile: Any) -> ToolOutcome:
    definition = registry.get(name) if isinstance(name, str) else None
    shown = str(name)[:64]
    if definition is None:
        return ToolOutcome(shown, "invalid", reason=f"there is no tool named {shown!r}")
    try:
        scope = resolve_scope(spec, profile)
    except ValueError as exc:
        return ToolOutcome(shown, "error", reason=str(exc))
    why = refusal(user, definition, scope)
    if why is not None:
        return ToolOutcome(shown, "denied", reason=why)
    errors = validate_arguments(arguments, parameters_of(definition))
    if errors:
        return invalid_arguments(shown, errors)
    if isinstance(definition, ReadTool):
        return _read(definition, user, arguments)
    binding = registry.binding(definition)
    assert binding is not None  # refusal() said it is routed
    return _dispatch(definition, binding, user, arguments)


def execute_tool(
    user: Any, name: str, arguments: dict[str, Any], *, spec: Any = None, profile: Any = None,
    sent_from: SentFrom | None = None,
) -> ToolOutcome:
    """Run one tool call as `user`, re-checking that the tool is offered under `spec`/`profile`.

    `sent_from` is the browser session the person's message came with: the call is made with it, and
    only while it still signs in `user` (otherwise nothing is done and `session_ended` is set). Without
    it the call acts as `user` with no session: only code that names the user itself calls it so (tests,
    the management command); a run started from the socket always passes its session.

    Never raises. Confirmation is the caller's business: the run loop pauses before calling this
    when the offered tool's `.confirm` is true, and calls it once the user approved.
    """
    token = _sent_from.set(sent_from)
    try:
        return _execute(user, name, arguments, spec, profile)
    except Exception as exc:
        logger.exception("Assistant tool %r failed", name)
        return ToolOutcome(str(name)[:64], "error", reason=_summary(exc))
    finally:
        _sent_from.reset(token)


def read_rows(
    user: Any, definition: ReadTool, filters: dict[str, Any], *, sent_from: SentFrom | None = None,
) -> ToolOutcome:
    """A declared read narrowed by `filters` the caller chose (not arguments a model sent, so they are not
    validated against the read's parameters), as `user`, through the same middleware and scope as a read
    the model asks for. The page the person has open is read this way (assistant/page_context/). Checks
    that `user` may use the read at all; never raises."""
    token = _sent_from.set(sent_from)
    try:
        # Whichever spec a chat is under: what the person has open is theirs to see, and only read.
        why = refusal(user, definition, resolve_scope(ANY_TOOL, "restricted"))
        if why is not None:
            return ToolOutcome(definition.name, "denied", reason=why)
        return _read(definition, user, {**filters, "limit": 1})
    except Exception as exc:
        logger.exception("Assistant read %r failed", definition.name)
        return ToolOutcome(definition.name, "error", reason=_summary(exc))
    finally:
        _sent_from.reset(token)
