"""The AG-UI endpoint (`assistant:ag-ui`, `POST /assistant/ag-ui/`): a `RunAgentInput` in, its event stream out.

An async view, served by the host's URLconf and ASGI app like any view, so the site's middleware sees every
request. It answers who is asking and whether the input is one, in one trip to a database thread, and then
streams (`assistant.agui.stream`):

- the person's browser session, for a frontend on the site's own origin, with Django's CSRF check (the
  `X-CSRFToken` header, as any of the site's own scripts sends it): a session without it is refused (403);
- or one of the person's access tokens (`Authorization: Bearer ast_…`, made on their tokens page), checked as the
  MCP endpoint checks them, by the authenticator the MCP app adds where it is installed
  (`assistant.access.authority.TOKEN_AUTHENTICATORS`): no cookie is read then, so no CSRF token is needed;
- neither: 401, with a bearer challenge.

What is not a run's input is answered at once with a 4xx JSON body, `{"error": code, "message": words}`: no
JSON object, not a `RunAgentInput` (the protocol's own pydantic model says why), too large, not UTF-8. What
the assistant refuses once the input is read (a message while the chat's run works, a stale or forged
resume, the rate limit) is the stream's only event: RUN_ERROR, with the panel's code.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from assistant.access.authority import TOKEN_AUTHENTICATORS, SentFrom
from assistant.agui.checks import INSTALL, protocol_problem
from assistant.agui.models import ID_MAX
from assistant.infra.text import parsed_json_problem

logger = logging.getLogger(__name__)

#: The most a body nests; a `RunAgentInput` needs a handful of levels (messages, their parts, tool schemas).
MAX_DEPTH = 64

# What reads or answers a run (assistant.agui.runs, assistant.agui.stream) imports ag-ui-protocol, an optional
# package that may be absent. This module is imported with the site's URLconf, so the functions below import them
# when they run, after the endpoint has checked that the package is there: without it the site still starts and
# the endpoint answers 503.


def _refusal(status: int, code: str, message: str, **headers: str) -> JsonResponse:
    return JsonResponse({"error": code, "message": message}, status=status, headers=headers or None)


class _Csrf(CsrfViewMiddleware):
    """Django's own CSRF check, answering a refusal in the endpoint's JSON instead of the site's 403 page."""

    def _reject(self, request: HttpRequest, reason: str) -> HttpResponse:
        logger.info("AG-UI request refused by the CSRF check: %s", reason)
        return _refusal(HTTPStatus.FORBIDDEN, "csrf_failed",
                        f"The CSRF check failed ({reason}). A request with the person's session sends the site's CSRF "
                        "token in the X-CSRFToken header (the csrftoken cookie's value).")


def _no_view(request: HttpRequest) -> HttpResponse:  # what the CSRF middleware would call next (never here)
    raise AssertionError("not called")


def _authenticate(request: HttpRequest) -> Any:
    """The Caller this request acts as, or the response refusing it."""
    from assistant.agui.runs import Caller  # ag-ui-protocol may be absent: see above

    if request.headers.get("Authorization") is not None:
        # A bearer token, the person's own agent's credential: the session cookie, if any, is not used.
        if not TOKEN_AUTHENTICATORS:  # no app that issues tokens is installed
            return _refusal(HTTPStatus.UNAUTHORIZED, "unauthorized", "This site takes no access tokens: sign in.",
                            **{"WWW-Authenticate": "Bearer"})
        signed_in = TOKEN_AUTHENTICATORS[0](request)
        if isinstance(signed_in, HttpResponseBase):
            return signed_in
        user, token = signed_in
        return Caller(user=user, token=token)
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return _refusal(HTTPStatus.UNAUTHORIZED, "unauthorized",
                        "Sign in first (the site's session), or send an access token (Authorization: Bearer ast_…).",
                        **{"WWW-Authenticate": "Bearer"})
    refused = _Csrf(_no_view).process_view(request, _no_view, (), {})
    if refused is not None:
        return refused
    # The run's tool calls are requests made with this session, from this address and page, as the panel's are.
    sent_from = SentFrom.from_scope({
        "session": request.session, "client": [request.META.get("REMOTE_ADDR")],
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
                    for name, value in request.headers.items()],
        "scheme": request.scheme,
    })
    if sent_from is None:
        return _refusal(HTTPStatus.UNAUTHORIZED, "unauthorized", "Sign in first: this request has no session.")
    return Caller(user=user, sent_from=sent_from)


def _id_problem(name: str, value: str) -> str | None:
    if not value or not value.strip():
        return f'"{name}" must not be empty.'
    if len(value) > ID_MAX:
        return f'"{name}" is at most {ID_MAX} characters long.'
    if "\x00" in value:
        return f'"{name}" must not contain NUL characters.'
    return None


def _read_input(body: bytes) -> Any:
    """The RunAgentInput of the body, or the response refusing it."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    from assistant.agui.runs import parse_json  # ag-ui-protocol may be absent: see above

    try:
        data = parse_json(body)
    except RecursionError:
        return _refusal(HTTPStatus.BAD_REQUEST, "bad_json", f"The input may nest at most {MAX_DEPTH} levels deep.")
    except UnicodeDecodeError:
        return _refusal(HTTPStatus.BAD_REQUEST, "bad_json", "The body must be UTF-8 text.")
    except ValueError:
        return _refusal(HTTPStatus.BAD_REQUEST, "bad_json", "The body must be one JSON object (a RunAgentInput), with "
                                                            "finite numbers.")
    if not isinstance(data, dict):
        return _refusal(HTTPStatus.BAD_REQUEST, "bad_input", "The body must be a JSON object: a RunAgentInput.")
    problem = parsed_json_problem(data, max_depth=MAX_DEPTH, what="The input")
    if problem is not None:
        return _refusal(HTTPStatus.BAD_REQUEST, "bad_json", problem)
    try:
        inp = RunAgentInput.model_validate(data)
    except ValidationError as invalid:
        errors = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'input'}: {error['msg']}"
            for error in invalid.errors(include_url=False)[:5])
        return _refusal(HTTPStatus.UNPROCESSABLE_ENTITY, "bad_input", f"Not a RunAgentInput: {errors}.")
    except (ValueError, TypeError, RecursionError) as invalid:
        return _refusal(HTTPStatus.UNPROCESSABLE_ENTITY, "bad_input", f"Not a RunAgentInput: {invalid}"[:500])
    for name, value in (("threadId", inp.thread_id), ("runId", inp.run_id),
                        *(("messages[].id", message.id) for message in inp.messages)):
        problem = _id_problem(name, value)
        if problem is not None:
            return _refusal(HTTPStatus.UNPROCESSABLE_ENTITY, "bad_input", problem)
    return inp


def _prepare(request: HttpRequest) -> Any:
    """Who asks and what: (Caller, RunAgentInput), or the response refusing the request."""
    try:
        # Read first: the CSRF check may read a form body, after which the raw body cannot be read.
        body = request.body
    except RequestDataTooBig:
        return _refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "The input is larger than this site takes.")
    caller = _authenticate(request)
    if isinstance(caller, HttpResponse):
        return caller
    content_type = request.content_type or ""
    if content_type != "application/json":
        return _refusal(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "bad_content_type",
                        "Send the RunAgentInput as JSON (Content-Type: application/json).")
    inp = _read_input(body)
    if isinstance(inp, HttpResponse):
        return inp
    return caller, inp


@csrf_exempt  # checked here, for the session only: a bearer token's request carries no cookie to forge
async def endpoint(request: HttpRequest) -> HttpResponseBase:
    """POST a RunAgentInput; see the module docstring."""
    if request.method != "POST":
        return _refusal(HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed", "POST a RunAgentInput here.",
                        Allow="POST")
    problem = protocol_problem()
    if problem is not None:
        return _refusal(HTTPStatus.SERVICE_UNAVAILABLE, "unavailable", f"{problem} {INSTALL}.")
    from assistant.agui.runs import in_db_thread  # ag-ui-protocol may be absent: see above

    prepared = await in_db_thread(_prepare)(request)
    if isinstance(prepared, HttpResponse):
        return prepared
    caller, inp = prepared
    from assistant.agui.stream import agui_stream  # ag-ui-protocol may be absent: see above

    response = StreamingHttpResponse(agui_stream(caller, inp), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy passes each event on as it comes
    return response


# Each write commits as it is made (a run queued, an answer given), under ATOMIC_REQUESTS too: Django refuses to
# wrap an async view in a transaction, and the stream's reads must not sit in one for its life.
endpoint._non_atomic_requests = set(connections)  # type: ignore[attr-defined]

