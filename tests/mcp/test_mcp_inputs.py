"""What the MCP endpoint takes, and what it refuses in the protocol's own shape (issue 32, item 5), through a real
daphne serving the site: a body that is not JSON (415), a request whose Accept admits no answer the transport gives
(406), a body past the site's upload limit (413), each a JSON-RPC error with nothing run or recorded; and a NUL in a
tool's argument, which PostgreSQL cannot store, refused as the call's invalid arguments before anything is
recorded or done. The same NUL rule holds for a tool call from any channel (the executor) and for AG-UI input."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from assistant.mcp.tokens import token_create
from assistant.models import AgentMessage, AgentRun
from assistant.testing.sockets import signed_in_client
from assistant.tools import execute_tool
from tests.testapp.models import Effect
from tracker.models import Project, Task

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}
#: What a client of the Streamable HTTP transport sends with every message.
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def secret(alice: Any) -> str:
    return token_create(owner=alice, name="Edges").secret


def headers(secret: str, method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    sent = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json", "Accept": ACCEPT,
            "MCP-Protocol-Version": VERSION, "Mcp-Method": method, **({"Mcp-Name": name} if name else {})}
    return {**sent, **extra}


def message(method: str, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method,
                       "params": {**(params or {}), "_meta": META}}).encode()


def post(port: int, body: bytes, sent: dict[str, str]) -> httpx2.Response:
    # Headers exactly as given: httpx would otherwise add an Accept of its own.
    with httpx2.Client(timeout=60) as client:
        request = client.build_request("POST", f"http://127.0.0.1:{port}/assistant/mcp/", content=body)
        request.headers.clear()
        request.headers.update({"Host": f"127.0.0.1:{port}", "Content-Length": str(len(body)), **sent})
        return client.send(request)


def json_rpc_error(answer: httpx2.Response, status: int) -> dict[str, Any]:
    """The answer is the protocol's own error: a JSON-RPC error object, with the HTTP status given."""
    assert answer.status_code == status, (answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith("application/json"), answer.headers
    payload = answer.json()
    assert payload["jsonrpc"] == "2.0" and "result" not in payload, payload
    assert isinstance(payload["error"]["code"], int) and payload["error"]["message"], payload
    return dict(payload["error"])


# --- the transport ---------------------------------------------------------------------------------------


def test_a_conforming_request_is_answered(port: int, secret: str) -> None:
    answer = post(port, message("tools/list"), headers(secret, "tools/list"))
    assert answer.status_code == 200 and answer.json()["result"]["tools"], answer.text[:500]


@pytest.mark.parametrize("content_type, body", [
    ("text/plain", None),  # a well-formed message, labelled as text
    ("application/x-www-form-urlencoded", b"jsonrpc=2.0&id=7&method=tools%2Flist"),
    ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\nb\r\n--x--\r\n"),
    (None, None),  # no Content-Type at all
])
def test_a_body_that_is_not_json_is_refused_415_and_nothing_is_done(
    port: int, secret: str, alice: Any, content_type: str | None, body: bytes | None
) -> None:
    project = Project.objects.create(owner=alice, name="Keep me")
    sent = headers(secret, "tools/call", "tracker_project_delete")
    sent.pop("Content-Type")
    if content_type is not None:
        sent["Content-Type"] = content_type
    call = message("tools/call", {"name": "tracker_project_delete", "arguments": {"pk": project.pk}})

    error = json_rpc_error(post(port, body if body is not None else call, sent), 415)

    assert "application/json" in error["message"]
    assert Project.objects.filter(pk=project.pk).exists() and not AgentRun.objects.exists()


@pytest.mark.parametrize("accept", [None, "text/html", "text/plain, image/png", "application/xml"])
def test_an_accept_header_that_admits_no_json_answer_is_refused_406(port: int, secret: str, alice: Any,
                                                                     accept: str | None) -> None:
    sent = headers(secret, "tools/call", "test_record_effect")
    sent.pop("Accept")
    if accept is not None:
        sent["Accept"] = accept
    call = message("tools/call", {"name": "test_record_effect", "arguments": {"label": "unasked"}})

    error = json_rpc_error(post(port, call, sent), 406)

    assert "Accept" in error["message"] and "application/json" in error["message"]
    assert not Effect.objects.exists() and not AgentRun.objects.exists()


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream, application/json;q=0.9", "*/*",
                                    "application/*", "text/event-stream"])
def test_an_accept_header_a_transport_client_sends_is_taken(port: int, secret: str, accept: str) -> None:
    """The transport's clients must take both a JSON answer and an event stream; one that names either (or a
    wildcard covering JSON) is answered in JSON."""
    answer = post(port, message("tools/list"), headers(secret, "tools/list", Accept=accept))
    assert answer.status_code == 200, answer.text[:500]


def test_a_body_past_the_upload_limit_is_a_json_rpc_413(port: int, secret: str) -> None:
    filler = "a" * 20_000_000
    body = message("tools/call", {"name": "test_record_effect", "arguments": {"label": filler}})

    error = json_rpc_error(post(port, body, headers(secret, "tools/call", "test_record_effect")), 413)

    assert "large" in error["message"]
    assert not Effect.objects.exists() and not AgentRun.objects.exists()


# --- NUL, on every channel -----------------------------------------------------------------------------


def tool_error(answer: httpx2.Response) -> dict[str, Any]:
    """A tools/call refused in band: a result flagged isError, whose text is the outcome the client's model reads."""
    assert answer.status_code == 200, answer.text[:500]
    result = answer.json()["result"]
    assert result["isError"] is True, result
    return dict(json.loads(result["content"][0]["text"]))


@pytest.mark.parametrize("tool, arguments, named", [
    ("tracker_task_create", {"project": "Home", "title": "milk\x00bread"}, "title"),
    ("test_record_effect", {"label": "a\x00b"}, "label"),
    ("tracker_task_create", {"project": "Home", "title": "ok", "description": "\x00"}, "description"),
    ("test_record_effect", {"label": "fine", "lab\x00el": "x"}, None),  # in an argument's name
])
def test_nul_in_a_tool_argument_is_refused_in_band_before_anything_is_recorded_or_done(
    port: int, secret: str, alice: Any, tool: str, arguments: dict[str, Any], named: str | None
) -> None:
    Project.objects.create(owner=alice, name="Home")
    call = message("tools/call", {"name": tool, "arguments": arguments})

    outcome = tool_error(post(port, call, headers(secret, "tools/call", tool)))

    assert (outcome["status"], outcome["took_effect"]) == ("invalid", False), outcome
    assert "NUL" in json.dumps(outcome["data"]["errors"]), outcome
    assert named is None or named in outcome["data"]["errors"], outcome
    # Nothing written, nothing recorded: no task, no effect, no run and no line in the agent's chat.
    assert not Task.objects.exists() and not Effect.objects.exists()
    assert not AgentRun.objects.exists() and not AgentMessage.objects.exists()


def test_the_executor_refuses_nul_in_an_argument_whichever_channel_calls_it(alice: Any) -> None:
    """The rule lives where every channel's tool calls pass: a call that reaches the executor with a NUL (a
    view with no form of its own to refuse it, here) is invalid arguments, and nothing is written."""
    outcome = execute_tool(alice, "test_record_effect", {"label": "a\x00b"})

    assert (outcome.status, outcome.took_effect) == ("invalid", False), outcome
    assert outcome.data["errors"]["label"] == "must not contain NUL characters"
    assert not Effect.objects.exists()


def test_an_ag_ui_message_with_nul_is_refused_in_ag_uis_own_shape(port: int, alice: Any) -> None:
    csrf = "c" * 32
    session = signed_in_client(alice).cookies["sessionid"].value
    body = {"threadId": "t-nul", "runId": "r-1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": "m-1", "role": "user", "content": "milk\x00bread"}]}
    answer = httpx2.post(f"http://127.0.0.1:{port}/assistant/ag-ui/", json=body, timeout=30,
                         headers={"Cookie": f"sessionid={session}; csrftoken={csrf}", "X-CSRFToken": csrf,
                                  "Accept": "text/event-stream"})

    events = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    assert [event["type"] for event in events] == ["RUN_ERROR"], answer.text[:500]
    assert events[0]["code"] == "bad_request" and "NUL" in events[0]["message"]
    assert not AgentRun.objects.exists() and not AgentMessage.objects.exists()
