"""Reading what came of a tool call: the view's answer turned into the step's outcome, the way a person reads
the page it would have shown.

The outcome is read from the response (redirect, form errors, 403, 404, JSON, the declared fields of the objects
of a list/detail view; or the exception the view raised, or the site's middleware answering in its place); a
page it cannot read is an `error` that says so, with a logged warning naming the view and the fix, never an
empty answer. An outcome also says whose text it carries (assistant/tools/provenance.py): the words of the
objects a page shows or acts on, or of the page a write sent the person to.

Firing the call as the person is the executor's (assistant/tools/executor.py); this module only reads what came
back, so how a page is read can be followed, and changed, apart from how the request is made.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    ObjectDoesNotExist,
    PermissionDenied,
    SuspiciousOperation,
    ValidationError,
)
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.urls import Resolver404, ResolverMatch, resolve

from assistant.conf import assistant_settings
from assistant.tools.declarations import ViewTool
from assistant.tools.pages import FIELDS_FIX, READ_FIX, WRITE_FIX
from assistant.tools.provenance import others_text, unknown_text
from assistant.tools.reads import OTHERS_TEXT, URL_KEY, jsonable, object_url
from assistant.tools.registry import _where
from assistant.tools.shows import shown_object

logger = logging.getLogger(__name__)

STATUSES = ("done", "data", "invalid", "denied", "not_found", "error")


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
    # The address a view tool's call was made to: with the page it sent the person to, where a card finds the
    # object it acted on (assistant/live/cards.py). Not said to the model.
    called: str = ""

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

def exception_summary(exc: BaseException) -> str:
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
    url = object_url(obj) if URL_KEY not in names else None
    if url is not None:
        row[URL_KEY] = url  # its page, for an answer to link to
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


def response_outcome(definition: ViewTool, request: HttpRequest, response: HttpResponse) -> ToolOutcome:
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


def exception_outcome(name: str, exc: BaseException) -> ToolOutcome:
    if isinstance(exc, Http404):
        return ToolOutcome(name, "not_found", reason="not found")
    if isinstance(exc, PermissionDenied):
        return ToolOutcome(name, "denied", reason="permission denied")
    if isinstance(exc, BadRequest | SuspiciousOperation | ValidationError):
        return ToolOutcome(name, "invalid", reason=exception_summary(exc))
    return ToolOutcome(name, "error", reason=f"the view failed ({exception_summary(exc)})")


def gate_outcome(name: str, response: HttpResponse) -> ToolOutcome:
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

def carries_text(outcome: ToolOutcome, response: HttpResponse, sent: set[str]) -> bool:
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


def argument_strings(value: Any) -> set[str]:
    """The strings among a call's arguments: given back in its answer, they are the caller's own."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {text for item in value.values() for text in argument_strings(item)}
    if isinstance(value, list | tuple):
        return {text for item in value for text in argument_strings(item)}
    return set()


def subject_text(user: Any, where: str, match: ResolverMatch) -> list[dict[str, Any]] | None:
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


def answer_text(user: Any, where: str, match: ResolverMatch, outcome: ToolOutcome) -> list[dict[str, Any]]:
    """Whose words a view's answer carries: those of the object it acted on, or of the page it sent the person
    to. When neither is known, a JSON answer's text is someone else's (nobody can say otherwise); the messages
    of a page that names no object are taken as the site's own."""
    found = subject_text(user, where, match)
    target = (outcome.data or {}).get("redirect") if isinstance(outcome.data, dict) else None
    if found is None and isinstance(target, str):
        try:
            landed = resolve(urlsplit(target).path)
        except Resolver404:
            landed = None
        if landed is not None:
            found = subject_text(user, where, landed)
    if found is not None:
        return found
    if not isinstance(outcome.data, dict) or "redirect" in outcome.data or set(outcome.data) == {"messages"}:
        # Messages of a page that names no object: the site's own words (and what the call sent).
        return []
    return [unknown_text(where)]
