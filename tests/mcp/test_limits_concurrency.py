"""The per-minute limits hold exactly when many calls arrive at once (issue 32): real clients sending at the same
moment to daphne serving the site, with the real worker answering the runs that start. daphne runs with low
limits of its own (tests/settings.py reads them from its environment), so they are reached quickly.

What is held here: one MCP token sending the same write many times at once does it exactly
MAX_IDENTICAL_TOOL_CALLS times, and its reads at once are recorded exactly MCP_CALLS_PER_MINUTE times; a person's
AG-UI sends at once start exactly RUNS_PER_MINUTE runs. Every call past a limit gets its protocol's refusal and
records nothing (no run, message, chat or task).

The panel's sends go through the same `chat_send` as AG-UI's; a daphne process handles its sockets' database work
on one thread, so they race only between processes (tried with two daphnes: too seldom to hold in a test)."""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx2
import mcp_types as types
import pytest
from ag_ui.core import Event, EventType, RunAgentInput, RunErrorEvent, RunFinishedEvent, UserMessage
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from assistant.agui.models import AguiRun
from assistant.mcp.tokens import token_create
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.testing.sockets import signed_in_client
from tests.browser.harness import write_model_script
from tests.conftest import WorkerProcess, daphne_on_test_database
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

#: daphne's limits in this module: low enough to pass with a few dozen calls at once.
RUNS_PER_MINUTE = 5
MCP_CALLS_PER_MINUTE = 12
MAX_IDENTICAL_TOOL_CALLS = 3

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
T = TypeVar("T")


@pytest.fixture(scope="module")
def port(django_db_setup: None, django_db_blocker: Any, limited_env: dict[str, str]) -> Iterator[int]:
    with daphne_on_test_database(django_db_blocker, env=limited_env) as served:
        yield served


@pytest.fixture(scope="module")
def limited_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    model = tmp_path_factory.mktemp("limits-model") / "script.json"
    write_model_script(model, [{"text": "Noted."}])
    return {"ASSISTANT_MODEL": f"scripted:{model}", "ASSISTANT_RUNS_PER_MINUTE": str(RUNS_PER_MINUTE),
            "ASSISTANT_MCP_CALLS_PER_MINUTE": str(MCP_CALLS_PER_MINUTE),
            "ASSISTANT_MAX_IDENTICAL_TOOL_CALLS": str(MAX_IDENTICAL_TOOL_CALLS)}


def all_at_once(clients: list[Callable[[], Callable[[], T]]]) -> list[T]:
    """Each client in a thread of its own: it gets ready (connects), then all send at the same moment; what
    each got back, in order."""
    ready = threading.Barrier(len(clients))
    results: list[Any] = [None] * len(clients)
    failures: list[BaseException] = []

    def run(index: int, client: Callable[[], Callable[[], T]]) -> None:
        try:
            send = client()
            ready.wait(timeout=60)
            results[index] = send()
        except BaseException as exc:  # raised in the test's thread below
            failures.append(exc)
            ready.abort()

    threads = [threading.Thread(target=run, args=(index, client)) for index, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if failures:
        raise failures[0]
    assert not any(thread.is_alive() for thread in threads), "a client did not finish"
    return results


# --- MCP -----------------------------------------------------------------------------------------------


def mcp_calls_at_once(port: int, secret: str, name: str, arguments: dict[str, Any],
                      times: int) -> list[types.CallToolResult]:
    """`times` agents of the token, each connected (initialized) first, then all calling `name` at once."""

    async def calls() -> list[types.CallToolResult]:
        async with AsyncExitStack() as stack:
            clients = []
            for _ in range(times):
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60))
                clients.append(await stack.enter_async_context(
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/assistant/mcp/", http_client=http))))
            return list(await asyncio.gather(*(client.call_tool(name, arguments) for client in clients)))

    try:
        return asyncio.run(calls())
    except BaseExceptionGroup as group:  # the clients' task groups wrap what went wrong: raise that
        while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
            group = group.exceptions[0]
        raise group from None


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def test_the_same_write_sent_many_times_at_once_by_one_token_is_done_exactly_the_identical_limit(
    port: int, alice: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    made = token_create(owner=alice, name="Looping agent", spec="default")

    results = mcp_calls_at_once(port, made.secret, "tracker_task_create",
                                {"project": home.pk, "title": "Buy milk"}, times=10)

    done = [result for result in results if not result.is_error]
    refused = [result for result in results if result.is_error]
    assert len(done) == MAX_IDENTICAL_TOOL_CALLS, [text_of(result) for result in results]
    assert Task.objects.filter(project=home, title="Buy milk").count() == MAX_IDENTICAL_TOOL_CALLS
    # The rest: the tool's in-band error, saying why, and nothing recorded for them.
    assert len(refused) == 10 - MAX_IDENTICAL_TOOL_CALLS
    assert all(f"made {MAX_IDENTICAL_TOOL_CALLS} times in the last minute" in text_of(result) for result in refused)
    runs = AgentRun.objects.filter(client_token_id=made.token.pk)
    assert runs.count() == MAX_IDENTICAL_TOOL_CALLS
    assert AgentStep.objects.filter(run__in=runs).count() == MAX_IDENTICAL_TOOL_CALLS
    assert AgentMessage.objects.filter(owner=alice).count() == 2 * MAX_IDENTICAL_TOOL_CALLS  # asked, answered


def test_reads_sent_at_once_past_the_tokens_limit_record_exactly_the_limit(port: int, alice: Any) -> None:
    Project.objects.create(owner=alice, name="Home")
    made = token_create(owner=alice, name="Busy agent", spec="default")
    times = MCP_CALLS_PER_MINUTE * 2 + 6

    results = mcp_calls_at_once(port, made.secret, "tracker_project_list", {}, times=times)

    done = [result for result in results if not result.is_error]
    refused = [result for result in results if result.is_error]
    assert len(done) == MCP_CALLS_PER_MINUTE, [text_of(result) for result in refused[:3]]
    assert all(result.structured_content["data"]["results"][0]["name"] == "Home" for result in done)
    assert len(refused) == times - MCP_CALLS_PER_MINUTE
    assert all(f"made {MCP_CALLS_PER_MINUTE} calls in the last minute" in text_of(result) for result in refused)
    runs = AgentRun.objects.filter(client_token_id=made.token.pk)
    assert runs.count() == MCP_CALLS_PER_MINUTE
    assert AgentStep.objects.filter(run__in=runs).count() == MCP_CALLS_PER_MINUTE


# --- a person's sends over AG-UI ---------------------------------------------------------------------


def agui_send(port: int, session: str, text: str) -> list[Any]:
    """A frontend's new thread with the person's message, sent with their signed-in session (and its CSRF
    token); the stream's events, read to its end, parsed as the protocol's own models."""
    csrf = secrets.token_hex(16)
    body = RunAgentInput(thread_id=f"t-{secrets.token_hex(6)}", run_id=f"r-{secrets.token_hex(6)}",
                         messages=[UserMessage(id=f"m-{secrets.token_hex(4)}", content=text)], tools=[], context=[],
                         state={}, forwarded_props={}).model_dump(by_alias=True, mode="json")
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-CSRFToken": csrf,
               "Cookie": f"sessionid={session}; csrftoken={csrf}"}
    events = []
    with httpx2.Client(timeout=60) as client, client.stream(
            "POST", f"http://127.0.0.1:{port}/assistant/ag-ui/", content=json.dumps(body), headers=headers) as response:
        assert response.headers.get("content-type", "").startswith("text/event-stream"), response.read()
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(EVENTS.validate_json(line[5:].strip()))
    return events


def assert_refused_as_rate_limited(events: list[Any]) -> None:
    # A refusal is the stream's only event.
    assert len(events) == 1 and isinstance(events[0], RunErrorEvent) and events[0].code == "rate_limited", events


def test_ag_ui_sends_at_once_past_the_persons_limit_start_exactly_the_limit(
    port: int, alice: Any, celery_worker: WorkerProcess
) -> None:
    session = signed_in_client(alice).cookies["sessionid"].value
    sends = 3 * RUNS_PER_MINUTE

    def client(number: int) -> Callable[[], list[Any]]:
        return lambda: agui_send(port, session, f"Note {number}")  # nothing to connect ahead

    streams = all_at_once([functools.partial(client, number) for number in range(sends)])

    started = [events for events in streams if events[0].type == EventType.RUN_STARTED]
    refused = [events for events in streams if events[0].type != EventType.RUN_STARTED]
    assert len(started) == RUNS_PER_MINUTE, [events[0] for events in streams]
    assert all(isinstance(events[-1], RunFinishedEvent) for events in started)  # each answered by the worker
    assert len(refused) == sends - RUNS_PER_MINUTE
    for events in refused:
        assert_refused_as_rate_limited(events)
    # Nothing of the refused sends is on the record: no run, message, chat or thread.
    assert AgentRun.objects.filter(owner=alice).count() == RUNS_PER_MINUTE
    assert AgentMessage.objects.filter(owner=alice, role="user").count() == RUNS_PER_MINUTE
    assert AgentChat.objects.filter(owner=alice).count() == RUNS_PER_MINUTE
    assert AguiRun.objects.filter(owner=alice).count() == RUNS_PER_MINUTE
