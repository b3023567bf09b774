"""The MCP endpoint: the person's own agent (Claude, Cursor, ChatGPT…) calls the site's tools as the person.

Built on django-mcpz: a plain synchronous Django view speaking MCP 2026-07-28 and, in the stateless mode
they allow, the 2025 revisions clients still use, over streamable HTTP. It is served by the host's own
URLconf and ASGI app like any view, so the site's middleware sees every request. What this module adds
is who is calling and what they are offered:

- every request authenticates with one of the person's access tokens (`assistant.mcp.tokens`), checked
  again on every call (401 with a bearer challenge when it acts as nobody);
- every registered tool of the site is a tool of the server, and a request sees exactly the ones
  `tools_for(person, token's spec, token's profile)` gives it: the rest are absent from `tools/list` and
  calling one answers like a tool that does not exist;
- every `tools/call` is a run of the person's, through the panel's executor (`assistant.mcp.calls`).
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from typing import Any, NoReturn

from django.core.exceptions import RequestDataTooBig
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse
from django_mcpz.elicitation import Answer, Elicitation
from django_mcpz.jsonrpc import INVALID_REQUEST, PARSE_ERROR, error_response
from django_mcpz.server import (
    TOOL_NAME_RE,
    ElicitationUnavailableError,
    MCPServer,
    ToolError,
    elicit,
)

from assistant.conversation.services import Refused, approved_values
from assistant.mcp.calls import (
    Caller,
    CallRefused,
    approval_summary,
    call_digest,
    held_by_containment,
    rate_check,
    run_open,
    step_decline,
    step_run,
    step_take,
    waiting_call,
)
from assistant.mcp.models import AccessToken
from assistant.mcp.oauth import oauth_authenticate, oauth_installed
from assistant.mcp.tokens import TOKEN_PREFIX, TokenRefused, token_authenticate
from assistant.models import AgentStep
from assistant.tools import Tool, tools_for
from assistant.tools.declarations import ReadTool, ViewTool
from assistant.tools.offer import parameters_of
from assistant.tools.outcome import invalid_arguments
from assistant.tools.registry import registry
from assistant.tools.validation import nul_errors
from assistant.turn.calls import changed_by_person
from assistant.turn.confirmation import containment_card

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "These tools act in this web application as the person who made the access token, with exactly their "
    "permissions: what they could not do in the browser, these cannot do either. A call that changes "
    "something important waits for the person's approval: you are asked, or the person approves it in the "
    "assistant panel of the site, after which calling the same tool with the same arguments runs it once."
)
#: The key an approval question is asked and answered under names the step it answers.
APPROVAL_KEY = "approve-step-"
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve", "description": "Do this as you, now."}},
    "required": ["approve"],
}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
#: The kinds of value an elicitation form may hold (the MCP specification's primitive schemas).
_PRIMITIVES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def approval_schema(step: AgentStep, tool: Tool) -> dict[str, Any]:
    """The approval question's form: Approve, and each of the call's plain values (text, a number, a yes or no, one
    of a choice) prefilled with what the agent asked for, for the person to correct before approving (approve with
    changes). A list or an object stays as asked: the form cannot hold it."""
    properties = dict(APPROVAL_SCHEMA["properties"])
    described = tool.parameters.get("properties") or {}
    for name, value in (step.arguments or {}).items():
        kind = _PRIMITIVES.get(type(value))
        if kind is None or name in properties:
            continue
        given = described.get(name)
        schema: dict[str, Any] = given if isinstance(given, dict) else {}
        field: dict[str, Any] = {"type": kind, "title": name, "default": value}
        if isinstance(schema.get("description"), str):
            field["description"] = schema["description"]
        choices = schema.get("enum")
        if kind == "string" and isinstance(choices, list) and all(isinstance(each, str) for each in choices):
            field["enum"] = choices
        properties[name] = field
    return {**APPROVAL_SCHEMA, "properties": properties}


def token_auth(request: HttpRequest) -> HttpResponse | None:
    """The server's authentication: a bearer access token of the person's (`ast_…`), or, where the host
    connects apps through OAuth, an OAuth access token of an app the person consented to (whose 401s point
    the app at the authorization server). An RFC 6750 challenge when neither acts as anyone."""
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    bearer = credential.strip() if scheme.lower() == "bearer" else ""
    try:
        if bearer.startswith(TOKEN_PREFIX) or not oauth_installed():
            if not bearer:
                return _unauthorized(None, request)
            user, token = token_authenticate(bearer)
        else:
            found = oauth_authenticate(request)
            if isinstance(found, HttpResponse):
                return found
            user, token = found
    except TokenRefused as refused:
        # The reason is for the log; the caller learns only that the token acts as nobody.
        logger.info("MCP request refused: %s", refused)
        return _unauthorized("invalid_token", request)
    request.user = user
    request.mcp_token = token  # type: ignore[attr-defined]
    return None


def token_caller(request: HttpRequest) -> tuple[Any, Any] | HttpResponse:
    """`token_auth` for an endpoint of another app that takes the person's access tokens (AG-UI's, through
    `assistant.access.authority.TOKEN_AUTHENTICATORS`): the person and the token, or the response refusing them."""
    refused = token_auth(request)
    if refused is not None:
        return refused
    return request.user, request.mcp_token  # type: ignore[attr-defined]


#: What a client of the Streamable HTTP transport must take (it lists both in Accept); this server answers JSON.
_ANSWERABLE = ("application/json", "text/event-stream")


def transport_refusal(request: HttpRequest) -> HttpResponse | None:
    """Whether the (authenticated) request is one the Streamable HTTP transport sends, checked before its body
    is read: a JSON-RPC message as `application/json` (else 415), from a client that takes a JSON answer (else
    406: the transport's clients list `application/json` and `text/event-stream` in Accept, and must take
    either), within the site's upload limit (else 413, where Django would answer its own HTML 400 page). Each
    refusal a JSON-RPC error, as the protocol's other refusals are; nothing is read further or done."""
    if request.content_type != "application/json":
        return error_response(None, INVALID_REQUEST, "Unsupported Media Type: send the JSON-RPC message as JSON "
                                                     "(Content-Type: application/json).",
                              status=HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
    if "Accept" not in request.headers or not any(request.accepts(kind) for kind in _ANSWERABLE):
        return error_response(None, INVALID_REQUEST, "Not Acceptable: this server answers in JSON; send an Accept "
                                                     "header that admits it (Accept: application/json, "
                                                     "text/event-stream).", status=HTTPStatus.NOT_ACCEPTABLE)
    try:
        request.body  # noqa: B018  (read now, so that its size is answered here)
    except RequestDataTooBig:
        return error_response(None, INVALID_REQUEST, "Payload Too Large: the message is larger than this site takes.",
                              status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    return None


def admit(request: HttpRequest) -> HttpResponse | None:
    """The server's gate, run after django-mcpz's method and Origin checks and before it reads the body: who
    calls (`token_auth`), then whether the request is one the transport sends (`transport_refusal`)."""
    return token_auth(request) or transport_refusal(request)


def _unauthorized(error: str | None, request: HttpRequest | None = None) -> HttpResponse:
    parts = [f'error="{error}"'] if error else []
    if request is not None and oauth_installed():
        # Where apps connect through OAuth, every 401 says where to ask for a new grant (RFC 9728).
        from django_mcpz.oauth.discovery import resource_metadata_url, resource_url

        parts.append(f'resource_metadata="{resource_metadata_url(resource_url(request))}"')
    challenge = "Bearer " + ", ".join(parts) if parts else "Bearer"
    body = {"error": error or "unauthorized",
            "error_description": "An access token of the person is needed (Authorization: Bearer ast_…)."}
    return HttpResponse(json.dumps(body), status=HTTPStatus.UNAUTHORIZED, content_type="application/json",
                        headers={"WWW-Authenticate": challenge})


class AssistantMCPServer(MCPServer):
    """The server, routed as the view itself (so django-mcpz's OAuth discovery finds it in the URLconf),
    with the site's tools registered on its first request."""

    # Not a page for browsers: the session cookie is not accepted, only an access token, so no CSRF token
    # is needed or checked (django-mcpz exempts it, and from LoginRequiredMiddleware); and each call's
    # rows commit as they are written (an approval question must outlive the answer that asks it), under
    # ATOMIC_REQUESTS too.
    @property
    def _non_atomic_requests(self) -> set[str]:
        return set(connections)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        register_tools()
        try:
            return super().__call__(request)
        except RecursionError:
            # django-mcpz's decoder lets a body nested past the parser's depth (about a thousand levels,
            # two kilobytes of brackets) escape as RecursionError: nothing has been read or done yet.
            return error_response(None, PARSE_ERROR, "Parse error: the message nests too deeply to be read.",
                                  status=HTTPStatus.BAD_REQUEST)


SERVER = AssistantMCPServer(name="django-inapp-assistant", title="This site's assistant tools", version="1",
                            instructions=INSTRUCTIONS, auth=admit, minimum_protocol_version="2025-03-26")


def _caller(request: HttpRequest) -> Caller:
    token: AccessToken = request.mcp_token  # type: ignore[attr-defined]
    return Caller(user=request.user, token=token)


def offer(request: HttpRequest) -> dict[str, Tool]:
    """The tools this request's token may use, by name: worked out once per request."""
    cached = getattr(request, "assistant_offer", None)
    if cached is None:
        caller = _caller(request)
        cached = {tool.name: tool for tool in tools_for(caller.user, caller.token.spec, caller.profile)}
        request.assistant_offer = cached  # type: ignore[attr-defined]
    return cached


def _offered(name: str) -> Any:
    def permitted(request: HttpRequest) -> bool:
        return name in offer(request)

    return permitted


def _result(outcome: Any, also: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the agent is told of a call: its outcome (and `also`: what the person changed before approving it)."""
    answer: dict[str, Any] = {**outcome.to_model(), **(also or {})}
    # Every outcome says whose text it carries, [] for only the person's own and the site's values: the agent's
    # own model can weigh what others wrote as the panel's containment does (docs/agents.md). An error's JSON
    # too: a form's errors or a refusal may quote an object's text.
    answer.setdefault("others_text", [])
    if outcome.status in ("done", "data"):
        return answer
    # A refusal, a form's errors, a missing object: the client's model reads the outcome and can correct
    # itself (errors are by field, as the panel's model hears them).
    raise ToolError(json.dumps(answer, ensure_ascii=False, default=str))


def _answer_in(request: HttpRequest) -> tuple[int, Answer] | None:
    """The client's answer to an approval question carried by this call, and the step it answers; None
    when the call carries none (django-mcpz has checked that it answers the question its signed state says
    was asked, of this token, for this tool and these arguments)."""
    elicitation: Elicitation | None = getattr(request, "mcp_elicitation", None)
    for key, answer in (elicitation.answers.items() if elicitation is not None else ()):
        number = key.removeprefix(APPROVAL_KEY)
        if key.startswith(APPROVAL_KEY) and number.isdigit():
            return int(number), answer
    return None


def _values_approved(caller: Caller, step: AgentStep, content: dict[str, Any]) -> bool:
    """The person's corrections in the approval form, put on the waiting step (approve with changes) once checked
    as the panel's are; whether there were any. Refused (a ToolError saying each field's problem), changing nothing,
    when they do not fit: the call may be made again and the person asked again."""
    asked = step.arguments or {}
    corrected = {name: content[name] for name in asked if name in content and content[name] != asked[name]}
    if not corrected:
        return False
    try:
        fields = approved_values(caller.user, step.run, step, {**asked, **corrected})
    except Refused as refused:
        problems = "; ".join(f"{name}: {problem}" for name, problem in (refused.fields or {}).items())
        raise ToolError(f"{refused.message} {problems}".strip()) from None
    if fields:
        step.save(update_fields=list(fields))
    return bool(fields)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


def _ask(request: HttpRequest, step: AgentStep, caller: Caller, tool: Tool) -> NoReturn:
    """Ask the person through their client (which answers by calling again), when it can be asked;
    otherwise the call is refused saying where the question waits."""
    why = f"{(step.containment or {}).get('why')} " if step.containment else ""
    message = (f"{why}{_sentence(step.summary)}\n\nYour agent “{caller.token.name}” asks to do this as you. Approve? "
               "(You may correct its values first.)")
    try:
        elicit(request, message, approval_schema(step, tool), key=f"{APPROVAL_KEY}{step.pk}", expired_message=None)
    except ElicitationUnavailableError:
        raise ToolError(
            f"This needs the person's approval first: {why}{_sentence(step.summary)} It now waits in their "
            "assistant panel; once they approve it there, call this tool again with the same arguments and it "
            "runs once. Nothing was done yet.") from None
    # Only reached with an answer already in the call, which `call_tool` takes before asking.
    raise ToolError("The approval question could not be asked; nothing was done.")


def _may_be_held(caller: Caller, tool: Tool) -> bool:
    """Whether a call of `tool` by this token may have been held by containment before (and wait still)."""
    return caller.token.containment and tool.kind != "read"


def call_tool(name: str, request: HttpRequest, arguments: dict[str, Any]) -> dict[str, Any]:
    """One `tools/call`: a run of the person's, approved where the panel would ask first."""
    caller = _caller(request)
    tool = offer(request)[name]  # the server's permission check let only an offered name through
    unstorable = nul_errors(arguments)
    if unstorable:
        # Refused before anything is recorded: stored, the NUL would become U+FFFD, and what ran would not be
        # what was asked. The same answer the executor gives any channel's call with a NUL.
        return _result(invalid_arguments(name, unstorable))
    answered = _answer_in(request)
    if answered is not None:
        return _on_answer(caller, tool, arguments, *answered)
    try:
        rate_check(caller, name=name, arguments=arguments, writes=tool.kind != "read")
    except CallRefused as refused:
        raise ToolError(refused.message) from None
    held = held_by_containment(caller, tool)
    asks = tool.confirm or bool(held)
    # A write containment held stays the person's to answer once asked, even when the window ends before they
    # do: the agent calling again gets their answer, not a way round it. Only a token with containment has such
    # writes, so no other write looks for one.
    waiting = waiting_call(caller, tool, arguments) if asks or _may_be_held(caller, tool) else None
    if not asks and waiting is None:
        run, step = run_open(caller, tool, arguments)
        return _result(step_run(caller, run, step))
    if waiting is None:
        run, step = run_open(caller, tool, arguments, summary=approval_summary(caller, tool, arguments),
                             containment=containment_card(held) if held else None)
    else:
        run, step = waiting
        if step.confirmation == AgentStep.Confirmation.APPROVED and step_take(step, answered=False):
            return _result(step_run(caller, run, step))
    _ask(request, step, caller, tool)


def _on_answer(caller: Caller, tool: Tool, arguments: dict[str, Any], step_id: int, answer: Answer) -> dict[str, Any]:
    """The client's answer to the approval question of step `step_id`: taken once, for that very call."""
    step = (AgentStep.objects.select_related("run")
            .filter(pk=step_id, run__client_token_id=caller.token.pk, run__owner=caller.user).first())
    if step is None or (step.run.config or {}).get("mcp", {}).get("call") != call_digest(tool.name, arguments):
        raise ToolError("That answer is for no call of this token waiting for approval; nothing was done.")
    if answer.action == "cancel":
        raise ToolError("The person dismissed the question without answering; the action waits in their "
                        "assistant panel, and nothing was done.")
    content = answer.content or {}
    if answer.action == "accept" and content.get("approve") is True:
        with transaction.atomic():
            changed = _values_approved(caller, step, content)
            if not step_take(step, answered=True):
                transaction.set_rollback(True)
                raise ToolError("That approval was already used, or the call no longer waits for one (it was "
                                "answered, stopped or has expired); nothing was done. Call the tool again to ask "
                                "anew.")
        return _result(step_run(caller, step.run, step), changed_by_person(step) if changed else {})
    if not step_decline(step):
        raise ToolError("That answer came for a call that no longer waits for one; nothing was done.")
    raise ToolError("The person declined this action; nothing was done. Do not try it again; ask them what "
                    "they want instead.")


_registered = False
_registering = threading.Lock()


def _annotations(definition: ViewTool | ReadTool) -> dict[str, Any]:
    reads = definition.kind == "read"
    return {"read_only": reads, "destructive": None if reads else bool(definition.destructive),
            "idempotent": True if reads else None, "open_world": False}


def register_tools() -> None:
    """Every tool of the site's registry becomes a tool of the server, once per process, on the first
    request (the registry is complete only once the URLconf has been loaded)."""
    global _registered
    with _registering:
        if _registered:
            return
        for definition in registry.all():
            if TOOL_NAME_RE.fullmatch(definition.name) is None:
                logger.warning("Assistant tool %r is not offered over MCP: MCP tool names are 1-128 letters, "
                               "digits, '_', '-' and '.'", definition.name)
                continue
            schema = parameters_of(definition) or EMPTY_SCHEMA

            def handler(request: HttpRequest, arguments: dict[str, Any], name: str = definition.name) -> Any:
                return call_tool(name, request, arguments)

            SERVER.tool(name=definition.name, description=definition.description, input_schema=schema,
                        permission=_offered(definition.name), **_annotations(definition))(handler)
        _registered = True
