"""Firing a tool: the view is resolved through the URL resolver and sent a request through the site's own
middleware, made with the session the person's message came from (assistant/tools/request.py), so the
site's gates, the view's decorators and its own queryset scoping decide, as in the browser.

Nothing here is reachable over HTTP: the only way in is a Python call from the run loop. What the view
answered is read as the person would read its page (assistant/tools/outcome.py). It never raises: a
crashing view becomes an `error` outcome and its writes are rolled back. A call whose session has ended
never reaches the view: its outcome says so (`session_ended`).
"""

from __future__ import annotations

import datetime
import decimal
import logging
import typing
import uuid
from contextvars import ContextVar
from typing import Any
from urllib.parse import unquote

from django.core.files.uploadedfile import UploadedFile
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import NoReverseMatch, ResolverMatch, reverse
from django.views.generic.edit import DeletionMixin

from assistant.access.authority import SentFrom
from assistant.attachments.store import attachment_upload
from assistant.llm.types import ATTACHMENT_FORMAT
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.offer import parameters_of, refusal, resolve_scope
from assistant.tools.outcome import (
    ToolOutcome,
    answer_text,
    argument_strings,
    carries_text,
    exception_outcome,
    exception_summary,
    gate_outcome,
    invalid_arguments,
    response_outcome,
    subject_text,
)
from assistant.tools.reads import OTHERS_TEXT, run_read
from assistant.tools.registry import Binding, own_match, registry
from assistant.tools.request import ToolCallState, acts_as_person, build_request, send
from assistant.tools.validation import validate_arguments

logger = logging.getLogger(__name__)

#: A spec of every declared tool: reading what the person has open is theirs whichever spec a chat is under.
ANY_TOOL = {"tools": "__all__"}


SESSION_ENDED_REASON = "the session this was asked from has ended (signed out); nothing was done"

# The session of the call in progress (set by `execute_tool`), so every request the call makes carries it
# without widening each internal signature between the entry point and the request.
_sent_from: ContextVar[SentFrom | None] = ContextVar("assistant_tool_sent_from", default=None)


def _internal_request(user: Any, method: str, path: str, data: QueryDict, tool_name: str,
                      files: dict[str, UploadedFile] | None = None) -> HttpRequest:
    """The request for one tool call, as the person's browser would send it (see tools/request.py)."""
    return build_request(person=user, sent_from=_sent_from.get(), method=method, path=path, data=data,
                         tool_name=tool_name, files=files)


def _attached_files(tool: str, binding: Binding, user: Any,
                    submitted: dict[str, Any]) -> dict[str, UploadedFile] | ToolOutcome:
    """The files the call's file fields name, by field: each one of the person's own attachments, read as the
    upload the view's form expects. Taken out of `submitted`; a name that is no file of theirs is invalid."""
    files: dict[str, UploadedFile] = {}
    errors: dict[str, list[str]] = {}
    for key, prop in binding.parameters.get("properties", {}).items():
        if prop.get("format") != ATTACHMENT_FORMAT or key not in submitted:
            continue
        value = submitted.pop(key)
        if value is None:
            continue
        upload = attachment_upload(user=user, attachment_id=value)
        if upload is None:
            errors[key] = ["no file of the person's with this id (give the id of a file attached to a message)"]
        else:
            files[key] = upload
    if errors:
        return ToolOutcome(tool, "invalid", reason="a file argument names no file of the person's",
                           data={"errors": errors})
    return files


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
        return None, exception_outcome(name, state.exception)
    if not state.reached:
        return None, gate_outcome(name, response)
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
    before = subject_text(user, definition.name, match) if deleting else None
    response, outcome = _sent(definition.name, request, _with_extra(match, extra))
    if outcome is not None:
        return outcome
    assert response is not None
    outcome = response_outcome(definition, request, response)
    outcome.called = request.path
    if not outcome.others_text and carries_text(outcome, response, argument_strings(arguments or {})):
        outcome.others_text = before if before is not None else answer_text(user, definition.name, match, outcome)
    return outcome


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
        outcome = response_outcome(probe, request, response)
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
    files = _attached_files(definition.name, binding, user, submitted)
    if isinstance(files, ToolOutcome):
        return files
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
        outcome = _call(definition, match, _internal_request(user, "POST", path, data, definition.name, files),
                        extra, user, arguments)
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
        return ToolOutcome(str(name)[:64], "error", reason=exception_summary(exc))
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
        return ToolOutcome(definition.name, "error", reason=exception_summary(exc))
    finally:
        _sent_from.reset(token)
