"""The MCP endpoint attacked over real HTTP (issue 21): `POST /assistant/mcp/` on a real daphne serving the
site on the test database, spoken to raw with `http.client`, as any client (or attacker) on the network can.

- fuzzed bodies, headers, credentials and tool arguments, with a token and without, never get a 500 or a
  traceback: each answer is a JSON-RPC error or result, or a 4xx; a body past the upload limit is a 4xx;
- a bearer that acts as nobody (none, malformed, unknown, revoked, expired, a deactivated person, a changed
  password, a spec gone, the person's browser session alone) is answered 401 with a bearer challenge, the
  same for every reason, and makes no run; a session cookie beside a token changes nothing of who calls;
- a tool outside the token's offer is absent from `tools/list` and, called, answers exactly as a tool that
  does not exist, and does nothing; headers that disagree with the body run nothing;
- a `requestState` is the call's own: replayed by another token, by another person, with other arguments,
  or tampered with, it is refused and nothing is deleted; another person's project is not deleted even
  with a yes, and its question names nothing of theirs;
- a foreign Origin, or a host name rebound to this server, is refused (DNS rebinding).
"""

from __future__ import annotations

import base64
import http.client
import itertools
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from django_mcpz.headers import encode_header_value
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from assistant.mcp.models import AccessToken
from assistant.mcp.tokens import token_create, token_revoke
from assistant.models import AgentRun, AgentStep
from tracker.models import Project

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/assistant/mcp/"
VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
ELICITS = {"elicitation": {"form": {}}}
# A well-formed token that no one was ever given.
UNKNOWN_TOKEN = "ast_AbCdEfGh_" + "x" * 43


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any] | None:
        return self.json.get("error")

    @property
    def result(self) -> dict[str, Any]:
        payload = self.json
        assert "result" in payload, payload
        return payload["result"]

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers.items() if key.lower() == name.lower()), None)


def post(port: int, body: bytes, headers: dict[str, str] | None = None, *, method: str = "POST") -> Answer:
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
        client.request(method, PATH, body=body, headers=sent)
        response = client.getresponse()
        return Answer(response.status, dict(response.getheaders()), response.read())
    finally:
        client.close()


def bearer(secret: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"} if secret else {}


def meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {META_VERSION: VERSION, META_CAPABILITIES: ELICITS if capabilities is None else capabilities}


def rpc(port: int, secret: str | None, method: str, params: dict[str, Any] | None = None, *,
        headers: dict[str, str] | None = None, request_id: Any = 1) -> Answer:
    """One 2026-07-28 request, headers and `_meta` as a conforming client sends them."""
    params = {**(params or {}), "_meta": {**meta(), **(params or {}).get("_meta", {})}}
    sent = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method, **bearer(secret)}
    if method == "tools/call":
        sent["Mcp-Name"] = str(params.get("name"))
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
    return post(port, body, {**sent, **(headers or {})})


def call(port: int, secret: str | None, tool: str, arguments: dict[str, Any], *,
         headers: dict[str, str] | None = None, **extra: Any) -> Answer:
    return rpc(port, secret, "tools/call", {"name": tool, "arguments": arguments, **extra}, headers=headers)


def tool_names(port: int, secret: str) -> list[str]:
    answer = rpc(port, secret, "tools/list")
    assert answer.status == 200, answer.body
    return [tool["name"] for tool in answer.result["tools"]]


def token(owner: Any, name: str = "agent", **fields: Any) -> tuple[str, AccessToken]:
    created = token_create(owner=owner, name=name, **fields)
    return created.secret, created.token


def refused_in_band(answer: Answer) -> bool:
    """A JSON-RPC error, or a tool result flagged isError: either way the call did not happen."""
    assert answer.status < 500, answer.body
    payload = answer.json
    return "error" in payload or payload.get("result", {}).get("isError") is True


# --- fuzzing ------------------------------------------------------------------------------------


def well_formed(answer: Answer) -> None:
    """What every answer is, whatever was sent: never a server error, never a traceback; a JSON-RPC error
    or result, or a plain 4xx (a 401 with its challenge)."""
    assert answer.status < 500, (answer.status, answer.body[:2000])
    text = answer.body.decode("utf-8", "replace")
    assert "Traceback" not in text and 'File "' not in text, text[:2000]
    if answer.status == 401:
        assert (answer.header("WWW-Authenticate") or "").startswith("Bearer"), answer.headers
        note("401")
        return
    if answer.status == 202:  # a notification: acknowledged, nothing said
        assert answer.body == b""
        return
    try:
        payload = json.loads(answer.body)
    except ValueError:
        # A plain refusal before the endpoint is reached (the server's own 400 for a body it will not parse
        # as a form, say): a 4xx, no more.
        assert 400 <= answer.status < 500, (answer.status, answer.body[:2000])
        return
    assert isinstance(payload, dict) and payload.get("jsonrpc") == "2.0", payload
    assert ("error" in payload) != ("result" in payload), payload
    if "error" in payload:
        assert isinstance(payload["error"]["code"], int) and isinstance(payload["error"]["message"], str)
        assert answer.status == 200 or 400 <= answer.status < 500
    else:
        assert answer.status == 200 and isinstance(payload["result"], dict)
    outcome = payload.get("error", {}).get("code") or payload.get("result", {}).get("resultType")
    note(f"{answer.status} {outcome}{' isError' if payload.get('result', {}).get('isError') else ''}")


def note(outcome: str) -> None:
    """What the fuzzing reached, for --hypothesis-show-statistics (outside a fuzzed test: nothing)."""
    if currently_in_test_context():
        event(outcome)


METHODS = ["tools/list", "tools/call", "server/discover", "initialize", "ping", "notifications/initialized",
           "resources/list", "prompts/get", "", "tools/call/x"]
TOOLS = ["tracker_project_list", "tracker_project_delete", "tracker_project_create", "no_such_tool",
         "=?base64?dHJhY2tlcl9wcm9qZWN0X2xpc3Q=?=", "../admin"]
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
ids = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=40), st.none(), st.booleans(),
                st.floats(allow_nan=False), st.lists(st.integers(), max_size=2), st.just(10**40))
capabilities = st.one_of(st.just(ELICITS), st.just({}), json_values,
                         st.fixed_dictionaries({"elicitation": json_values}))
metas = st.one_of(
    st.just(meta()), st.just(meta({})), st.just(None), json_values,
    st.fixed_dictionaries({}, optional={
        META_VERSION: st.one_of(st.just(VERSION), st.sampled_from(["2025-06-18", "2099-01-01", ""]), json_values),
        META_CAPABILITIES: capabilities,
    }),
)
params = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        "_meta": metas,
        "name": st.one_of(st.sampled_from(TOOLS), st.text(max_size=200), json_values),
        "arguments": st.one_of(json_values, st.fixed_dictionaries({}, optional={
            "pk": st.one_of(st.integers(min_value=-(2**70), max_value=2**70), json_values),
            "name": json_values, "description": json_values})),
        "cursor": json_values,
        "requestState": st.one_of(st.text(max_size=300), json_values),
        "inputResponses": st.one_of(json_values, st.dictionaries(
            st.text(max_size=20), st.fixed_dictionaries({"action": json_values, "content": json_values}),
            max_size=2)),
        "protocolVersion": st.sampled_from(["2025-11-25", "2025-03-26", "1999", ""]),
    }),
)


def deep_call(depth: int) -> bytes:
    """A well-formed tools/call whose arguments nest `depth` deep (built as text: too deep for json.dumps)."""
    nested = '{"n":' * depth + "1" + "}" * depth
    return ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tracker_project_list",'
            f'"_meta":{json.dumps(meta())},"arguments":{{"a":{nested}}}}}}}').encode()


rpc_messages = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.one_of(st.just("2.0"), json_values),
    "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=50), json_values),
    "id": ids,
    "params": params,
})
# Mostly valid JSON-RPC requests, so that the fuzzing gets past the envelope to the methods and the tools.
requests = st.fixed_dictionaries({
    "jsonrpc": st.just("2.0"),
    "method": st.sampled_from(METHODS),
    "id": st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=40)),
}, optional={"params": params})
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda value: json.dumps(value).encode()),
    rpc_messages.map(lambda message: json.dumps(message).encode()),
    st.lists(rpc_messages, min_size=0, max_size=4).map(lambda batch: json.dumps(batch).encode()),  # batches
    # Nested deep, but within what the JSON parser copes with (deeper: see the test of its own below).
    st.integers(min_value=1, max_value=300).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(min_value=1, max_value=300).map(deep_call),
)
header_sets = st.fixed_dictionaries({}, optional={
    "MCP-Protocol-Version": st.one_of(st.sampled_from([VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "",
                                                       "2026-07-28, 2026-07-28", "latest"]), header_text),
    "Mcp-Method": st.one_of(st.sampled_from(METHODS), header_text),
    "Mcp-Name": st.one_of(st.sampled_from(TOOLS), header_text, st.just("=?base64?////?="),
                          st.just("=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=")),
    "Content-Type": st.one_of(st.sampled_from([
        "application/json", "text/plain", "multipart/form-data", "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded", "application/json; charset=latin-1"]), header_text),
    "Accept": st.sampled_from(["application/json, text/event-stream", "text/html", "*/*", ""]),
})


@pytest.fixture
def alice_secret(alice: Any) -> str:
    return token(alice, "fuzz")[0]


FUZZ = hypothesis_settings(max_examples=100, deadline=None, derandomize=True,
                           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(body=bodies, headers=header_sets, authenticated=st.booleans())
def test_fuzzed_requests_never_get_a_server_error_or_a_traceback(port: int, alice_secret: str, body: bytes,
                                                                 headers: dict[str, str], authenticated: bool) -> None:
    answer = post(port, body, {**headers, **bearer(alice_secret if authenticated else None)})

    well_formed(answer)
    if not authenticated:
        # Refused: 401, or a 400 for a body the server will not even read (a broken multipart form).
        assert answer.status in (400, 401) and b'"result"' not in answer.body, answer.body


@FUZZ
@given(message=st.one_of(requests, rpc_messages), headers=header_sets, matching=st.booleans())
def test_fuzzed_json_rpc_messages_with_a_token_are_answered_in_json_rpc(
        port: int, alice_secret: str, message: dict[str, Any], headers: dict[str, str], matching: bool) -> None:
    """JSON-RPC-shaped messages, their headers either as a conforming client sends them or fuzzed."""
    if matching and isinstance(message.get("method"), str):
        # (A method no header can carry as it is goes Base64-encoded, which the server need not decode.)
        headers = {**headers, "MCP-Protocol-Version": VERSION, "Mcp-Method": encode_header_value(message["method"])}
        given_params = message.get("params")
        if isinstance(given_params, dict) and isinstance(given_params.get("name"), str):
            headers["Mcp-Name"] = encode_header_value(given_params["name"])
    answer = post(port, json.dumps(message).encode(), {**headers, **bearer(alice_secret)})

    well_formed(answer)
    assert answer.status != 401


_fuzz_tokens = itertools.count(1)


def schema_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of an argument's declared type now and then, anything else the rest of the time."""
    typed = {"integer": st.integers(min_value=-(2**70), max_value=2**70), "string": st.text(max_size=200),
             "boolean": st.booleans(), "number": st.floats(allow_nan=False, allow_infinity=False),
             "array": st.lists(json_values, max_size=3)}.get(str(schema.get("type")))
    choices = [st.sampled_from(schema["enum"])] if isinstance(schema.get("enum"), list) else []
    return st.one_of(*choices, *([typed] if typed is not None else []), json_values)


@hypothesis_settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_fuzzed_arguments_to_every_offered_tool_are_answered_in_band(port: int, alice: Any,
                                                                     data: st.DataObject) -> None:
    """Every tool the token is offered, called as a conforming client would, with arguments of the declared
    names and any values (and names of no argument): an in-band answer each time, never a tool that "failed
    unexpectedly" (an exception the server hid) nor a 500."""
    if not Project.objects.filter(owner=alice).exists():
        Project.objects.create(owner=alice, name="Fuzzed")
    secret, _ = token(alice, f"fuzz {next(_fuzz_tokens)}")  # a fresh token: the calls per minute are counted
    listed = rpc(port, secret, "tools/list").result["tools"]
    tool = data.draw(st.sampled_from(sorted(listed, key=lambda tool: tool["name"])), label="tool")
    properties = tool["inputSchema"].get("properties", {})
    arguments = data.draw(st.fixed_dictionaries({}, optional={
        **{name: schema_values(schema) for name, schema in properties.items()},
        "not_an_argument": json_values,
    }), label="arguments")

    answer = call(port, secret, tool["name"], arguments, _meta=meta(data.draw(capabilities, label="capabilities")))

    well_formed(answer)
    assert answer.status == 200, answer.body
    assert b"failed unexpectedly" not in answer.body, answer.body[:2000]


@pytest.mark.parametrize("body", [
    pytest.param(b"[" * 5_000 + b"]" * 5_000, id="arrays"),
    pytest.param(b'{"a":' * 5_000 + b"1" + b"}" * 5_000, id="objects"),
    pytest.param(deep_call(5_000), id="tool-arguments"),
])
def test_a_body_nested_past_the_parsers_depth_is_refused_not_a_server_error(port: int, alice_secret: str,
                                                                          body: bytes) -> None:
    """A few kilobytes of brackets from anyone holding a token: the JSON parser gives up past its depth (a
    RecursionError, under daphne from about 950 levels), which must be answered as the parse error it is
    (or any 4xx), not a 500. Without a token it is a 401 before the body is read."""
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "tracker_project_list"}
    for secret in (alice_secret, None):
        answer = post(port, body, {**headers, **bearer(secret)})
        well_formed(answer)


def test_tool_arguments_nested_deep_are_answered_in_band(port: int, alice_secret: str) -> None:
    answer = post(port, deep_call(400), {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call",
                                         "Mcp-Name": "tracker_project_list", **bearer(alice_secret)})
    well_formed(answer)
    assert answer.status == 200


def test_other_verbs_are_not_allowed(port: int, alice_secret: str) -> None:
    for verb in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS"):
        answer = post(port, b"", bearer(alice_secret), method=verb)
        assert answer.status == 405 and b"Traceback" not in answer.body, verb


credentials = st.one_of(
    st.builds(lambda scheme, value: f"{scheme} {value}", st.sampled_from(["Bearer", "bearer", "BEARER", "Basic",
                                                                          "Token", "Bearer  ", ""]),
              st.one_of(header_text, st.builds(lambda prefix, rest: prefix + rest,
                                               st.sampled_from(["ast_", "mcp_", "ast_AbCdEfGh_", ""]), header_text))),
    header_text,
)


@FUZZ
@given(authorization=credentials, message=requests)
def test_fuzzed_credentials_are_refused_401_never_a_server_error(port: int, alice_secret: str, authorization: str,
                                                                 message: dict[str, Any]) -> None:
    """Anything in Authorization that is not a token of someone's (an `ast_` one or a connected app's OAuth
    token alike): 401 with its challenge."""
    headers = {"Authorization": authorization, "MCP-Protocol-Version": VERSION, "Mcp-Method": message["method"]}
    answer = post(port, json.dumps(message).encode(), headers)

    well_formed(answer)
    assert answer.status == 401, (answer.status, answer.body[:500])


def test_a_body_past_the_upload_limit_is_a_4xx_not_a_server_error(port: int, alice_secret: str) -> None:
    filler = "a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                       "params": {"_meta": meta(), "filler": filler}}).encode()
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list", **bearer(alice_secret)}

    answer = post(port, body, headers)

    assert 400 <= answer.status < 500, (answer.status, answer.body[:500])
    assert b"Traceback" not in answer.body
    # The same request within the limit is answered.
    assert rpc(port, alice_secret, "tools/list").status == 200


# --- who is calling -----------------------------------------------------------------------------


def _no_header(alice: Any) -> dict[str, str]:
    return {}


def _refused_token(alice: Any, spoil: Any) -> dict[str, str]:
    secret, made = token(alice, f"spoiled by {spoil.__name__}")
    spoil(alice, made)
    return bearer(secret)


def _revoke(alice: Any, made: AccessToken) -> None:
    token_revoke(owner=alice, token_id=made.pk)


def _expire(alice: Any, made: AccessToken) -> None:
    AccessToken.objects.filter(pk=made.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def _deactivate(alice: Any, made: AccessToken) -> None:
    alice.is_active = False
    alice.save()


def _change_password(alice: Any, made: AccessToken) -> None:
    alice.set_password("a new one")
    alice.save()


def _forget_spec(alice: Any, made: AccessToken) -> None:
    AccessToken.objects.filter(pk=made.pk).update(spec="a-spec-since-removed")


def _session_cookie(alice: Any) -> dict[str, str]:
    browser = Client()
    browser.force_login(alice)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"}


REFUSED = [
    pytest.param(_no_header, id="no-header"),
    pytest.param(lambda alice: {"Authorization": "Bearer"}, id="bearer-without-token"),
    pytest.param(lambda alice: {"Authorization": "Bearer not-a-token"}, id="malformed"),
    pytest.param(lambda alice: {"Authorization": "Bearer " + token(alice, "cut")[0][:-1]}, id="truncated"),
    pytest.param(lambda alice: {"Authorization": "Basic " + token(alice, "basic")[0]}, id="basic-scheme"),
    pytest.param(lambda alice: {"Authorization": token(alice, "bare")[0]}, id="no-scheme"),
    pytest.param(lambda alice: bearer(UNKNOWN_TOKEN), id="unknown"),
    pytest.param(lambda alice: _refused_token(alice, _revoke), id="revoked"),
    pytest.param(lambda alice: _refused_token(alice, _expire), id="expired"),
    pytest.param(lambda alice: _refused_token(alice, _deactivate), id="person-deactivated"),
    pytest.param(lambda alice: _refused_token(alice, _change_password), id="password-changed"),
    pytest.param(lambda alice: _refused_token(alice, _forget_spec), id="spec-no-longer-exists"),
    pytest.param(_session_cookie, id="browser-session-cookie-alone"),
    pytest.param(lambda alice: {**_session_cookie(alice), **bearer(UNKNOWN_TOKEN)}, id="session-cookie-and-unknown"),
]


@pytest.mark.parametrize("credentials", REFUSED)
def test_a_bearer_that_acts_as_nobody_is_answered_401_and_makes_no_run(port: int, alice: Any,
                                                                       credentials: Any) -> None:
    project = Project.objects.create(owner=alice, name="Keep me")
    headers = credentials(alice)
    runs, projects = AgentRun.objects.count(), Project.objects.count()

    answers = [
        rpc(port, None, "tools/list", headers=headers),
        call(port, None, "tracker_project_create", {"name": "Made by nobody"}, headers=headers),
        call(port, None, "tracker_project_delete", {"pk": project.pk}, headers=headers),
        # A legacy client's opening.
        post(port, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-06-18"}}).encode(), headers),
    ]

    for answer in answers:
        assert answer.status == 401, (answer.status, answer.body[:500])
        assert (answer.header("WWW-Authenticate") or "").startswith("Bearer")
        assert b"Keep me" not in answer.body and b"tracker_" not in answer.body
    assert (AgentRun.objects.count(), Project.objects.count()) == (runs, projects)
    assert Project.objects.filter(pk=project.pk).exists()


def test_every_refused_token_is_answered_alike(port: int, alice: Any) -> None:
    """Unknown, revoked, expired, a deactivated person's: the answer tells the caller nothing of which (no
    oracle for whether a stolen token was once real)."""
    presented = {
        "malformed": lambda: bearer("ast_short"),
        "unknown": lambda: bearer(UNKNOWN_TOKEN),
        "revoked": lambda: _refused_token(alice, _revoke),
        "expired": lambda: _refused_token(alice, _expire),
        "spec-gone": lambda: _refused_token(alice, _forget_spec),
        # Last, each refused for its own reason alone: these stop every token of alice's made before.
        "password-changed": lambda: _refused_token(alice, _change_password),
        "inactive": lambda: _refused_token(alice, _deactivate),
    }

    # Each asked as soon as it is refused, before the next refusal's change.
    answers = {reason: rpc(port, None, "tools/list", headers=refused()) for reason, refused in presented.items()}

    seen = {(answer.status, answer.header("WWW-Authenticate"), answer.body) for answer in answers.values()}
    assert len(seen) == 1, answers
    ((status, challenge, _),) = seen
    assert status == 401 and challenge.startswith('Bearer error="invalid_token"')


def test_the_same_token_is_accepted_until_it_is_revoked(port: int, alice: Any) -> None:
    """The control of the refusals above: the token works, and its very next request after revoking fails."""
    secret, made = token(alice)
    assert rpc(port, secret, "tools/list").status == 200

    token_revoke(owner=alice, token_id=made.pk)

    assert rpc(port, secret, "tools/list").status == 401


def test_a_token_in_the_query_string_is_not_accepted(port: int, alice: Any) -> None:
    secret, _ = token(alice)
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
        client.request("POST", f"{PATH}?access_token={secret}&token={secret}", body=body, headers={
            "Content-Type": "application/json", "MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})
        response = client.getresponse()
        assert response.status == 401 and b"tracker_" not in response.read()
    finally:
        client.close()


def test_a_browser_session_beside_a_token_changes_nothing_of_who_calls(port: int, alice: Any, bob: Any) -> None:
    """Alice's session cookie sent with Bob's token: the call is Bob's, with Bob's rights, and Alice's project
    is as out of reach as if no cookie had come."""
    alices = Project.objects.create(owner=alice, name="Alice's plans")
    bobs_secret, _ = token(bob, "bob's agent")
    headers = _session_cookie(alice)

    made = call(port, bobs_secret, "tracker_project_create", {"name": "Whose is this"}, headers=headers)
    renamed = call(port, bobs_secret, "tracker_project_update", {"pk": alices.pk, "name": "Taken"}, headers=headers)
    listed = call(port, bobs_secret, "tracker_project_list", {}, headers=headers)

    assert made.result.get("isError") is False, made.body
    assert Project.objects.get(name="Whose is this").owner == bob
    assert refused_in_band(renamed)
    assert b"Alice" not in listed.body and b"Alice" not in renamed.body
    assert Project.objects.get(pk=alices.pk).name == "Alice's plans"


# --- what a token is offered --------------------------------------------------------------------


def same_shape(hidden: Answer, missing: Answer, hidden_name: str, missing_name: str) -> None:
    """The two answers are alike but for the tool's name."""
    assert hidden.status == missing.status
    hidden_error, missing_error = hidden.json.get("error"), missing.json.get("error")
    assert hidden_error is not None and missing_error is not None, (hidden.body, missing.body)
    assert hidden_error["code"] == missing_error["code"]
    assert hidden_error["message"].replace(hidden_name, "<name>") == missing_error["message"].replace(
        missing_name, "<name>")
    assert hidden_error.get("data") == missing_error.get("data")
    assert hidden.body.replace(hidden_name.encode(), b"<name>") == missing.body.replace(
        missing_name.encode(), b"<name>")


HIDDEN = [
    # The reader reads the tracker only: writes are no tools of its.
    pytest.param({"spec": "reader"}, "tracker_project_create", {"name": "Sneaked in"}, id="reader-spec-create"),
    pytest.param({"spec": "reader"}, "tracker_project_delete", {"pk": "<project>"}, id="reader-spec-delete"),
    # A read-only token of the spec that has every tool: still no writes.
    pytest.param({"spec": "default", "read_only": True}, "tracker_project_create", {"name": "Sneaked in"},
                 id="read-only-create"),
    pytest.param({"spec": "default", "read_only": True}, "tracker_project_delete", {"pk": "<project>"},
                 id="read-only-delete"),
]


@pytest.mark.parametrize(("fields", "hidden", "arguments"), HIDDEN)
def test_a_tool_outside_the_offer_is_not_listed_and_answers_as_one_that_does_not_exist(
        port: int, alice: Any, fields: dict[str, Any], hidden: str, arguments: dict[str, Any]) -> None:
    project = Project.objects.create(owner=alice, name="Keep me")
    arguments = {key: project.pk if value == "<project>" else value for key, value in arguments.items()}
    secret, _ = token(alice, **fields)
    missing = "tracker_project_vanish"
    runs, projects = AgentRun.objects.count(), Project.objects.count()

    listed = rpc(port, secret, "tools/list")
    assert listed.status == 200 and listed.result["tools"], listed.body
    assert hidden.encode() not in listed.body
    assert "tracker_project_list" in [tool["name"] for tool in listed.result["tools"]]

    for elicits in (ELICITS, {}):
        params = {"_meta": meta(elicits)}
        same_shape(call(port, secret, hidden, arguments, **params), call(port, secret, missing, arguments, **params),
                   hidden, missing)
    # A legacy client, with no protocol headers, is answered alike too.
    legacy = [post(port, json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                     "params": {"name": name, "arguments": arguments}}).encode(), bearer(secret))
              for name in (hidden, missing)]
    same_shape(*legacy, hidden, missing)

    assert (AgentRun.objects.count(), Project.objects.count()) == (runs, projects)
    assert Project.objects.filter(pk=project.pk, name="Keep me").exists()
    assert not AgentStep.objects.filter(tool_name=hidden).exists()


def test_the_hidden_tool_is_offered_to_a_token_whose_spec_has_it(port: int, alice: Any) -> None:
    """The control of the test above: the same person, a token of the spec with every tool."""
    secret, _ = token(alice)
    names = tool_names(port, secret)
    assert {"tracker_project_create", "tracker_project_delete"} <= set(names)
    answer = call(port, secret, "tracker_project_create", {"name": "Made by my agent"})
    assert answer.status == 200 and answer.result.get("isError") is False, answer.body
    assert Project.objects.filter(owner=alice, name="Made by my agent").exists()


# --- headers that disagree with the body ------------------------------------------------------


DISAGREEING = [
    {"Mcp-Name": "tracker_project_list"},  # a harmless tool's name, for a gateway that routes or logs by it
    {"Mcp-Name": "=?base64?dHJhY2tlcl9wcm9qZWN0X2xpc3Q=?="},  # the same, Base64-encoded
    {"Mcp-Name": "=?base64?not base64?="},
    {"Mcp-Name": "TRACKER_PROJECT_CREATE"},
    {"Mcp-Method": "tools/list"},
    {"MCP-Protocol-Version": "2099-01-01"},
]


def test_a_call_whose_headers_disagree_with_its_body_runs_nothing(port: int, alice: Any) -> None:
    """What a proxy or gateway routes and logs by (the headers) and what runs (the body) are the same call,
    or nothing runs."""
    secret, _ = token(alice)
    runs, projects = AgentRun.objects.count(), Project.objects.count()

    for headers in DISAGREEING:
        answer = call(port, secret, "tracker_project_create", {"name": "Smuggled"}, headers=headers)

        well_formed(answer)
        assert answer.status == 400 and answer.error is not None, (headers, answer.body)
    assert (AgentRun.objects.count(), Project.objects.count()) == (runs, projects)


# --- an approval's requestState -----------------------------------------------------------------


APPROVE = {"action": "accept", "content": {"approve": True}}


@dataclass
class Asked:
    secret: str
    project: Project
    key: str
    state: str


def ask_to_delete(port: int, secret: str, project: Project) -> Asked:
    answer = call(port, secret, "tracker_project_delete", {"pk": project.pk})
    assert answer.status == 200, answer.body
    result = answer.result
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    return Asked(secret, project, key, result["requestState"])


def answer_with(port: int, secret: str, asked: Asked, arguments: dict[str, Any] | None = None, *,
                state: Any = None, key: str | None = None) -> Answer:
    return call(port, secret, "tracker_project_delete", {"pk": asked.project.pk} if arguments is None else arguments,
                requestState=asked.state if state is None else state, inputResponses={key or asked.key: APPROVE})


@pytest.fixture
def asked(port: int, alice: Any) -> Asked:
    secret, _ = token(alice, "asks")
    return ask_to_delete(port, secret, Project.objects.create(owner=alice, name="Precious"))


def test_an_approval_answered_by_the_token_it_was_asked_of_deletes_once(port: int, alice: Any, asked: Asked) -> None:
    """The control of the refusals below: the genuine answer works, once."""
    answer = answer_with(port, asked.secret, asked)
    assert answer.status == 200 and answer.result.get("isError") is False, answer.body
    assert not Project.objects.filter(pk=asked.project.pk).exists()

    again = answer_with(port, asked.secret, asked)
    assert refused_in_band(again)


def test_a_request_state_replayed_by_another_token_of_the_same_person_is_refused(port: int, alice: Any,
                                                                                 asked: Asked) -> None:
    other, _ = token(alice, "other agent")
    assert refused_in_band(answer_with(port, other, asked))
    assert Project.objects.filter(pk=asked.project.pk).exists()


def test_a_request_state_replayed_by_another_person_is_refused(port: int, alice: Any, bob: Any,
                                                               asked: Asked) -> None:
    bobs, _ = token(bob, "bob's agent")
    assert refused_in_band(answer_with(port, bobs, asked))
    # Bob's own project of the same name is safe too.
    Project.objects.create(owner=bob, name="Precious")
    assert refused_in_band(answer_with(port, bobs, asked))
    assert Project.objects.filter(name="Precious").count() == 2


def test_a_request_state_with_other_arguments_is_refused(port: int, alice: Any, asked: Asked) -> None:
    other = Project.objects.create(owner=alice, name="Also precious")
    for arguments in ({"pk": other.pk}, {"pk": str(asked.project.pk)}, {"pk": asked.project.pk, "extra": 1}, {}):
        assert refused_in_band(answer_with(port, asked.secret, asked, arguments)), arguments
    assert Project.objects.filter(pk__in=[asked.project.pk, other.pk]).count() == 2


def test_a_request_state_answered_for_another_question_key_is_ignored(port: int, alice: Any, asked: Asked) -> None:
    """An answer under a key other than the pending one is no answer: the question is asked again."""
    answer = answer_with(port, asked.secret, asked, key="approve-step-1")
    assert answer.status == 200
    assert answer.result.get("resultType") == "input_required" or refused_in_band(answer)
    assert Project.objects.filter(pk=asked.project.pk).exists()


def test_another_persons_project_cannot_be_deleted_even_with_their_yes(port: int, alice: Any, bob: Any) -> None:
    """Bob's agent asks to delete Alice's project: the question names nothing of hers (it reads as for a
    project that does not exist), and Bob's yes deletes nothing."""
    alices = Project.objects.create(owner=alice, name="Alice's secret plans")
    bobs_secret, _ = token(bob, "bob's agent")
    missing = alices.pk + 10_000

    theirs = ask_to_delete(port, bobs_secret, alices)
    nobodys = call(port, bobs_secret, "tracker_project_delete", {"pk": missing}).result
    ((_, question),) = call(port, bobs_secret, "tracker_project_delete", {"pk": alices.pk}).result[
        "inputRequests"].items()
    ((_, nobodys_question),) = nobodys["inputRequests"].items()
    assert question["params"]["message"].replace(str(alices.pk), "<pk>") == nobodys_question["params"][
        "message"].replace(str(missing), "<pk>")
    assert "secret plans" not in question["params"]["message"]

    answer = answer_with(port, bobs_secret, theirs)

    assert refused_in_band(answer), answer.body
    assert b"secret plans" not in answer.body
    assert Project.objects.filter(pk=alices.pk).exists()


def _flip(text: str, at: int) -> str:
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1:]


def test_a_forged_or_tampered_request_state_is_refused_without_a_server_error(port: int, alice: Any,
                                                                              asked: Asked) -> None:
    state = asked.state
    payload, _, signature = state.rpartition(":")
    forged_body = base64.urlsafe_b64encode(json.dumps({
        "principal": f"user:{alice.pk}:token:{AccessToken.objects.get(name='asks').pk}", "tool":
        "tracker_project_delete", "arguments": "0" * 64, "answers": {asked.key: APPROVE}, "pending": asked.key,
    }).encode()).decode().rstrip("=")
    forgeries = [
        _flip(state, 0), _flip(state, len(state) // 2), _flip(state, len(state) - 1),
        f"{payload}:{'A' * len(signature)}", payload, state + "x", state[:-1], "", ":", "::::", "a" * 10_000,
        f"{forged_body}:{signature}", f"{forged_body}:{payload.split(':')[-1]}:{signature}",
        "\u0000" + state, state.upper(), 12, None, ["x"], {"state": state},
    ]
    for forged in forgeries:
        if forged is None:
            continue
        answer = answer_with(port, asked.secret, asked, state=forged)
        well_formed(answer)
        assert refused_in_band(answer) or answer.result.get("resultType") == "input_required", (forged, answer.body)
    assert Project.objects.filter(pk=asked.project.pk).exists()


# --- where the request comes from ---------------------------------------------------------------


FOREIGN_ORIGINS = ["http://evil.example", "https://evil.example", "http://127.0.0.1.evil.example",
                   "http://localhost.evil.example:8000", "null", "file://", "http://[::2]"]


def test_a_foreign_origin_is_refused(port: int, alice: Any) -> None:
    """A page of another site (a DNS-rebinding attack) calling the endpoint from a browser is refused, with
    the person's token or without."""
    secret, _ = token(alice)
    runs, projects = AgentRun.objects.count(), Project.objects.count()
    for origin in FOREIGN_ORIGINS:
        for answer in (rpc(port, secret, "tools/list", headers={"Origin": origin}),
                       call(port, secret, "tracker_project_create", {"name": "From evil"}, headers={"Origin": origin}),
                       rpc(port, None, "tools/list", headers={"Origin": origin})):
            assert answer.status == 403, (origin, answer.status, answer.body[:300])
            assert b"tracker_" not in answer.body
    assert (AgentRun.objects.count(), Project.objects.count()) == (runs, projects)


def test_a_rebound_host_name_is_refused(port: int, alice: Any) -> None:
    """DNS rebinding: the attacker's name resolves to this server, so the request names their host."""
    secret, _ = token(alice)
    projects = Project.objects.count()
    for headers in ({"Host": "evil.example"}, {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}):
        for answer in (rpc(port, secret, "tools/list", headers=headers),
                       call(port, secret, "tracker_project_create", {"name": "Rebound"}, headers=headers)):
            assert 400 <= answer.status < 500 and b"tracker_" not in answer.body, (answer.status, answer.body[:300])
    assert Project.objects.count() == projects


def test_the_sites_own_origin_and_none_are_accepted(port: int, alice: Any) -> None:
    secret, _ = token(alice)
    for headers in ({}, {"Origin": f"http://127.0.0.1:{port}"}, {"Origin": f"http://localhost:{port}"}):
        assert rpc(port, secret, "tools/list", headers=headers).status == 200
