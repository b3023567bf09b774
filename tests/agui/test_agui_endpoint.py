"""The AG-UI endpoint as a frontend reaches it: real HTTP to daphne serving the site, the real Celery worker, the
scripted model (tests/conftest.py), every stream parsed back into the protocol's own pydantic types
(`ag_ui.core`) and held to the order the reference client's verifier enforces. Each test's data is committed,
so daphne's requests and the worker see it.

What is held here: a turn with a read, a write and an approval streams each step as tool call start, args, end
and result (and step started/finished), the reply as a text message, and the approval as RUN_FINISHED with the
interrupt outcome; the resume runs the action once, a stale resume and another person's are refused changing
nothing; a client that goes away mid-run gets the rest on a re-POST of the same runId, nothing said twice and
nothing done twice, and the run never doubles; a member's run (a delegation) is the protocol's subagent events,
its approval an interrupt attributed to it; a member's answer that is the reply (asked alone) is one text message,
the member's, in the stream and in a reload, and a request routed to a member with no model call is that member's
run, saying why first; bad input is a 4xx JSON
answer or RUN_ERROR, never a 500 (fuzzed); the session needs its CSRF token, an access token works instead and a
read-only one writes nothing; every run is the panel's record, with its steps, in the admin."""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from ag_ui.core import (
    AssistantMessage,
    Event,
    EventType,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallResultEvent,
    ToolMessage,
    UserMessage,
)
from django.test import Client as BrowserClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from assistant.agui.models import AguiRun
from assistant.infra import event_names
from assistant.mcp.tokens import token_create, token_revoke
from assistant.models import AgentChat, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import signed_in_client
from tests.browser.harness import write_model_script
from tests.conftest import WorkerProcess, daphne_on_test_database, wait_for
from tests.testapp.models import Effect
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

PATH = "/assistant/ag-ui/"
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agui-model") / "script.json"
    write_model_script(path, [{"text": "No script was set for this turn."}])
    return path


@pytest.fixture(scope="module")
def port(django_db_setup: None, django_db_blocker: Any, model_path: Path) -> Iterator[int]:
    with daphne_on_test_database(django_db_blocker, env={"ASSISTANT_MODEL": f"scripted:{model_path}"}) as served:
        yield served


@pytest.fixture
def model(model_path: Path) -> Callable[..., None]:
    """`model({"tool_calls": [...]}, {"text": "..."})`: what the scripted model answers in the next run."""
    return lambda *entries: write_model_script(model_path, entries)


# --- a client ---------------------------------------------------------------------------------------


@dataclass
class Browser:
    """The person's signed-in browser session, as a same-site frontend sends it: the session cookie, and the
    CSRF cookie with its value in X-CSRFToken."""

    session: str
    csrf: str = field(default_factory=lambda: "".join(secrets.choice(string.ascii_letters) for _ in range(32)))

    def headers(self, *, with_csrf: bool = True) -> dict[str, str]:
        cookie = f"sessionid={self.session}; csrftoken={self.csrf}"
        return {"Cookie": cookie, **({"X-CSRFToken": self.csrf} if with_csrf else {})}


def browser(user: Any) -> Browser:
    return Browser(signed_in_client(user).cookies["sessionid"].value)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@dataclass
class Stream:
    status: int
    headers: dict[str, str]
    events: list[Any]  # the protocol's own event models, parsed from each `data:` line
    body: bytes = b""

    def of(self, kind: EventType) -> list[Any]:
        return [event for event in self.events if event.type == kind]

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def last(self) -> Any:
        return self.events[-1]


def run_input(thread: str, run: str, *messages: Any, **fields: Any) -> dict[str, Any]:
    """A RunAgentInput as the reference client sends it (built with the protocol's model, sent by alias)."""
    return RunAgentInput(thread_id=thread, run_id=run, messages=list(messages), tools=[], context=[], state={},
                         forwarded_props={}, protocol_version="1.0", **fields).model_dump(by_alias=True,
                                                                                           mode="json")


def said(text: str, message_id: str | None = None) -> UserMessage:
    return UserMessage(id=message_id or f"m-{secrets.token_hex(4)}", content=text)


def post(port: int, body: Any, headers: dict[str, str], *, until: Callable[[Any], bool] | None = None,
         timeout: float = 30, raw: bytes | None = None, content_type: str = "application/json") -> Stream:
    """POST `body` (JSON) to the endpoint and read its stream to the end (or, with `until`, up to the first event
    for which it is true, then go away: the connection is closed mid-stream)."""
    content = raw if raw is not None else json.dumps(body).encode()
    request_headers = {"Content-Type": content_type, "Accept": "text/event-stream", **headers}
    with httpx2.Client(timeout=timeout) as client, client.stream(
            "POST", f"http://127.0.0.1:{port}{PATH}", content=content, headers=request_headers) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return Stream(response.status_code, dict(response.headers), [], response.read())
        events: list[Any] = []
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            events.append(EVENTS.validate_json(line[5:].strip()))
            if until is not None and until(events[-1]):
                break
        return Stream(response.status_code, dict(response.headers), events)


def verified(events: list[Any]) -> list[Any]:
    """The stream, checked against the rules the reference client's verifier (verifyEvents) enforces: it opens
    with RUN_STARTED (or is a lone RUN_ERROR), says nothing after its end, and opens and closes each text
    message, tool call, step and subagent in order, all closed before RUN_FINISHED."""
    assert events, "the stream said nothing"
    first = events[0].type
    assert first in (EventType.RUN_STARTED, EventType.RUN_ERROR), first
    texts: set[str] = set()
    tools: set[str] = set()
    steps: set[tuple[str | None, str]] = set()
    subagents: set[str] = set()
    ended: set[str] = set()
    for index, event in enumerate(events):
        kind = event.type
        if index and events[index - 1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            raise AssertionError(f"{kind} after the run ended")
        if kind == EventType.TEXT_MESSAGE_START:
            assert event.message_id not in texts
            texts.add(event.message_id)
        elif kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert event.message_id in texts, (kind, event.message_id)
            if kind == EventType.TEXT_MESSAGE_END:
                texts.discard(event.message_id)
        elif kind == EventType.TOOL_CALL_START:
            assert event.tool_call_id not in tools
            tools.add(event.tool_call_id)
        elif kind in (EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END):
            assert event.tool_call_id in tools, (kind, event.tool_call_id)
            if kind == EventType.TOOL_CALL_END:
                tools.discard(event.tool_call_id)
        elif kind == EventType.STEP_STARTED:
            key = (event.subagent_run_id, event.step_name)
            assert key not in steps, key
            steps.add(key)
        elif kind == EventType.STEP_FINISHED:
            key = (event.subagent_run_id, event.step_name)
            assert key in steps, key
            steps.discard(key)
        elif kind == EventType.SUBAGENT_STARTED:
            assert event.subagent_run_id not in subagents | ended
            subagents.add(event.subagent_run_id)
        elif kind in (EventType.SUBAGENT_FINISHED, EventType.SUBAGENT_ERROR):
            assert event.subagent_run_id in subagents
            subagents.discard(event.subagent_run_id)
            ended.add(event.subagent_run_id)
        elif kind == EventType.RUN_FINISHED:
            assert not (texts or tools or steps or subagents), (texts, tools, steps, subagents)
    return events


def tool_calls(stream: Stream) -> dict[str, str]:
    """The tool calls the stream started: wire id → tool name."""
    return {event.tool_call_id: event.tool_call_name for event in stream.of(EventType.TOOL_CALL_START)}


def results(stream: Stream) -> dict[str, dict[str, Any]]:
    return {event.tool_call_id: json.loads(event.content) for event in stream.of(EventType.TOOL_CALL_RESULT)}


def text_of(stream: Stream) -> str:
    return "".join(event.delta for event in stream.of(EventType.TEXT_MESSAGE_CONTENT))


def texts_as_recorded(stream: Stream) -> dict[str, str]:
    """Each text message the stream said, by id, checked to be exactly the text its model call recorded (the
    id names it: `msg-<run>-<seq>`): no delta lost, none said twice, no text under another call's id."""
    said: dict[str, str] = {}
    for event in stream.of(EventType.TEXT_MESSAGE_CONTENT):
        said[event.message_id] = said.get(event.message_id, "") + event.delta
    for wire, text in said.items():
        _, run, seq = wire.split("-")
        step = AgentStep.objects.get(run_id=int(run), seq=int(seq))
        assert step.kind == "model_call" and (step.result or {}).get("text") == text, (wire, text, step.result)
    return said


def interrupted(stream: Stream) -> Any:
    end = stream.last
    assert isinstance(end, RunFinishedEvent) and end.outcome is not None and end.outcome.type == "interrupt", end
    return end.outcome.interrupts


def succeeded(stream: Stream) -> RunFinishedEvent:
    end = stream.last
    assert isinstance(end, RunFinishedEvent), end
    assert end.outcome is None or end.outcome.type == "success", end.outcome
    return end


def resume(thread: str, run: str, interrupt_id: str, approve: bool = True, *,
           arguments: dict[str, Any] | None = None, **entry: Any) -> dict[str, Any]:
    """`arguments`: approve with these values instead of the model's."""
    payload = {"approve": approve, **({"arguments": arguments} if arguments is not None else {})}
    return run_input(thread, run, resume=[{"interrupt_id": interrupt_id, "status": "resolved",
                                           "payload": payload, **entry}])


# --- a turn ------------------------------------------------------------------------------------------


def test_a_read_a_write_and_an_approval_stream_as_ag_ui_and_the_resume_runs_the_action_once(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any, bob: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    Project.objects.create(owner=bob, name="Bob's garage")
    model({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
          {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "tidied"}}]},
          {"text": "One last thing needs you.", "tool_calls": [{"name": "tracker_project_delete",
                                                                  "arguments": {"pk": garden.pk}}]},
          {"text": "Deleted the project Garden."})
    person = browser(alice)

    first = post(port, run_input("thread-1", "run-1", said("Tidy up, then delete Garden", "m1")), person.headers())

    assert first.status == 200 and first.headers["content-type"].startswith("text/event-stream")
    verified(first.events)
    started = first.events[0]
    assert isinstance(started, RunStartedEvent)
    assert (started.thread_id, started.run_id, started.protocol_version) == ("thread-1", "run-1", "1.0")
    calls = tool_calls(first)
    assert sorted(calls.values()) == ["test_record_effect", "tracker_project_delete", "tracker_project_list"]
    by_name = {name: wire for wire, name in calls.items()}
    outcomes = results(first)
    # The read gave the person's rows only, the write took effect, the delete did not run: it asks first.
    listed = outcomes[by_name["tracker_project_list"]]
    assert [row["name"] for row in listed["data"]["results"]] == ["Garden"]
    assert outcomes[by_name["test_record_effect"]]["took_effect"] is True
    assert by_name["tracker_project_delete"] not in outcomes
    # Each tool call: start, its arguments as JSON, end; then its result, inside a step of its own.
    kinds = [event.type for event in first.events]
    list_start = kinds.index(EventType.TOOL_CALL_START)
    assert kinds[list_start:list_start + 3] == [EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS,
                                                EventType.TOOL_CALL_END]
    assert len(first.of(EventType.STEP_STARTED)) == len(first.of(EventType.STEP_FINISHED)) == 3
    args = {event.tool_call_id: json.loads(event.delta) for event in first.of(EventType.TOOL_CALL_ARGS)}
    assert args[by_name["tracker_project_delete"]] == {"pk": garden.pk}
    assert text_of(first) == "One last thing needs you."
    texts_as_recorded(first)
    [question] = interrupted(first)
    assert question.reason == "tool_approval" and question.tool_call_id == by_name["tracker_project_delete"]
    assert question.message.startswith("Delete the project “Garden”")
    assert question.response_schema["required"] == ["approve"]
    assert Project.objects.filter(pk=garden.pk).exists() and Effect.objects.filter(label="tidied").count() == 1
    run = AgentRun.objects.get()
    assert (run.status, run.channel) == ("awaiting_confirmation", "panel")

    # Another person cannot answer it, from their own thread or this one's name: as if it were not there.
    for thread in ("thread-1", "bobs-thread"):
        theirs = post(port, resume(thread, f"bob-{thread}", question.id), browser(bob).headers())
        assert [event.type for event in theirs.events] == [EventType.RUN_ERROR]
        assert theirs.last.code == "not_found"
    # Nor can a made-up interrupt of the person's own.
    forged = post(port, resume("thread-1", "run-forged", "approval-999999"), person.headers())
    assert forged.last.code == "not_found"
    assert Project.objects.filter(pk=garden.pk).exists()

    answered = post(port, resume("thread-1", "run-2", question.id), person.headers())

    verified(answered.events)
    assert (answered.events[0].run_id, answered.events[0].thread_id) == ("run-2", "thread-1")
    # The approved call's result, under the id the interrupt named; then the reply.
    assert results(answered)[question.tool_call_id]["took_effect"] is True
    assert not answered.of(EventType.TOOL_CALL_START)  # the call itself was said in the interrupted run
    assert text_of(answered) == "Deleted the project Garden."
    texts_as_recorded(answered)
    assert succeeded(answered).result == {"reply": "Deleted the project Garden."}
    assert not Project.objects.filter(pk=garden.pk).exists()

    # The same answer again: refused as the panel refuses a stale confirmation, and nothing runs.
    Project.objects.create(pk=garden.pk, owner=alice, name="Garden")
    again = post(port, resume("thread-1", "run-3", question.id), person.headers())
    assert isinstance(again.last, RunErrorEvent) and again.last.code == "stale_confirmation"
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentStep.objects.filter(tool_name="tracker_project_delete", took_effect=True).count() == 1
    assert AgentRun.objects.count() == 1
    run.refresh_from_db()
    assert (run.status, run.reply) == ("succeeded", "Deleted the project Garden.")
    assert run.config["agui"] == {"thread_id": "thread-1", "run_id": "run-1", "auth": "session"}
    # Posted again, a finished run's runId re-attaches (a reload), and starts nothing.
    reload = post(port, run_input("thread-1", "run-1", said("Tidy up, then delete Garden", "m1")), person.headers())
    verified(reload.events)
    assert isinstance(reload.events[1], MessagesSnapshotEvent) and succeeded(reload)
    assert AgentRun.objects.count() == 1


def test_a_resume_under_the_interrupted_runs_own_run_id_is_an_answer_and_given_once(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    """CopilotKit's useInterrupt resumes with the runId of the run that asked, the thread's messages as it
    holds them, and `resume`: an answer, not a re-attach to that run."""
    garden = Project.objects.create(owner=alice, name="Garden")
    model({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]},
          {"text": "Deleted the project Garden."})
    person = browser(alice)
    asked = post(port, run_input("t-own", "r-own", said("Delete Garden", "u-own")), person.headers())
    [question] = interrupted(asked)
    answer = run_input("t-own", "r-own", said("Delete Garden", "u-own"), resume=[
        {"interrupt_id": question.id, "status": "resolved", "payload": {"approve": True}}])
    # The runId names its thread still: under another threadId the answer is refused, and nothing is answered.
    elsewhere = post(port, {**answer, "threadId": "t-other"}, person.headers())
    assert elsewhere.last.code == "bad_request" and Project.objects.filter(pk=garden.pk).exists()

    answered = post(port, answer, person.headers())

    verified(answered.events)
    started = answered.events[0]
    assert (started.run_id, started.metadata["mode"]) == ("r-own", "resumed")
    assert not answered.of(EventType.MESSAGES_SNAPSHOT)  # the client holds the thread: nothing is said again
    assert results(answered)[question.tool_call_id]["took_effect"] is True
    assert text_of(answered) == "Deleted the project Garden."
    assert succeeded(answered).result == {"reply": "Deleted the project Garden."}
    assert not Project.objects.filter(pk=garden.pk).exists()
    step = AgentStep.objects.get(tool_name="tracker_project_delete")
    assert (step.confirmation, step.took_effect) == ("approved", True)

    # The same answer sent again under the same runId: refused as already answered, and nothing runs twice.
    Project.objects.create(pk=garden.pk, owner=alice, name="Garden")
    again = post(port, answer, person.headers())
    assert [event.type for event in again.events] == [EventType.RUN_ERROR]
    assert again.last.code == "stale_confirmation" and "without resume" in again.last.message
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentStep.objects.filter(tool_name="tracker_project_delete", took_effect=True).count() == 1
    # Without `resume`, the runId re-attaches to its run, as recorded.
    reload = post(port, run_input("t-own", "r-own", said("Delete Garden", "u-own")), person.headers())
    verified(reload.events)
    assert reload.events[0].metadata["mode"] == "attached" and succeeded(reload)

    # The thread goes on: the person's next message is a new run of the same chat.
    model({"text": "Nothing else is waiting."})
    following = post(port, run_input("t-own", "r-next", said("Delete Garden", "u-own"), said("Anything else?")),
                     person.headers())
    assert text_of(following) == "Nothing else is waiting." and succeeded(following)
    assert AgentRun.objects.count() == 2
    assert AgentRun.objects.filter(status="succeeded").count() == 2
    assert AguiRun.objects.filter(run_id="r-own").count() == 1


def test_a_declined_resume_under_the_interrupted_runs_own_run_id_runs_nothing(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    model({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]},
          {"text": "I left Garden alone."})
    person = browser(alice)
    [question] = interrupted(post(port, run_input("t-no", "r-no", said("Delete Garden", "u-no")),
                                  person.headers()))

    declined = post(port, resume("t-no", "r-no", question.id, approve=False), person.headers())

    verified(declined.events)
    assert declined.events[0].metadata["mode"] == "resumed"
    assert results(declined)[question.tool_call_id]["took_effect"] is False
    assert text_of(declined) == "I left Garden alone." and succeeded(declined)
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentStep.objects.get(tool_name="tracker_project_delete").confirmation == "denied"


def test_a_reload_is_a_messages_snapshot_of_the_thread_named_as_the_stream_named_it(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    model({"text": "Let me look.", "tool_calls": [{"name": "tracker_project_list", "arguments": {}}]},
          {"text": "You have no projects."})
    person = browser(alice)
    live = post(port, run_input("t-snap", "r-1", said("Any projects?", "u-1")), person.headers())
    verified(live.events)
    assert sorted(texts_as_recorded(live).values()) == ["Let me look.", "You have no projects."]

    # A client that reloads posts the thread without a new message: the thread as it is, then the run's end.
    reload = post(port, run_input("t-snap", "r-2", said("Any projects?", "u-1")), person.headers())

    verified(reload.events)
    assert [event.type for event in reload.events] == [EventType.RUN_STARTED, EventType.MESSAGES_SNAPSHOT,
                                                       EventType.RUN_FINISHED]
    messages = reload.events[1].messages
    assert [type(message) for message in messages] == [UserMessage, AssistantMessage, ToolMessage, AssistantMessage]
    user, asked, result, answer = messages
    assert (user.id, user.content) == ("u-1", "Any projects?")  # the client's own id of its message
    # The ids the live stream used: the text's message, the tool call on it, its result.
    [start] = live.of(EventType.TOOL_CALL_START)
    [first_text, second_text] = live.of(EventType.TEXT_MESSAGE_START)
    assert asked.id == first_text.message_id == start.parent_message_id and asked.content == "Let me look."
    assert asked.tool_calls[0].id == start.tool_call_id and asked.tool_calls[0].function.name == "tracker_project_list"
    assert result.tool_call_id == start.tool_call_id and json.loads(result.content)["status"] == "data"
    assert (answer.id, answer.content) == (second_text.message_id, "You have no projects.")
    assert AgentRun.objects.count() == 1


def test_a_client_that_goes_away_mid_run_gets_the_rest_on_the_same_run_id_nothing_doubled(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    model({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}}]},
          {"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 2}}]},
          {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "two"}}]},
          {"text": "Both recorded."})
    person = browser(alice)
    body = run_input("t-away", "r-away", said("Record one and two", "u-away"))

    # The client reads up to the first result, then its connection drops.
    cut = post(port, body, person.headers(), until=lambda event: isinstance(event, ToolCallResultEvent))
    assert isinstance(cut.last, ToolCallResultEvent)
    assert json.loads(cut.last.content)["data"]["recorded"] == "one"
    # The run goes on without it, in the worker: its next step starts with nobody listening.
    wait_for(lambda: AgentStep.objects.filter(tool_name="test_wait").exists(), what="the run's next tool call")

    back = post(port, body, person.headers())

    verified(back.events)
    assert back.events[0].metadata["mode"] == "attached"
    snapshot = back.events[1]
    assert isinstance(snapshot, MessagesSnapshotEvent)
    in_snapshot = {call.id for message in snapshot.messages if isinstance(message, AssistantMessage)
                   for call in message.tool_calls or []}
    resulted = {message.tool_call_id for message in snapshot.messages if isinstance(message, ToolMessage)}
    assert cut.last.tool_call_id in in_snapshot & resulted
    # What the snapshot holds is not said again; the rest is said once.
    live = tool_calls(back)
    assert not set(live) & in_snapshot
    assert not set(results(back)) & resulted
    every = {**dict.fromkeys(in_snapshot, ""), **live}
    assert len(every) == 3
    assert text_of(back) == "Both recorded."
    texts_as_recorded(back)
    succeeded(back)
    assert [effect.label for effect in Effect.objects.order_by("pk")] == ["one", "two"]
    assert AgentRun.objects.count() == 1 and AgentRun.objects.get().status == "succeeded"
    assert AguiRun.objects.filter(run_id="r-away").count() == 1


def test_a_second_post_while_the_run_works_attaches_to_it_and_a_new_message_is_refused(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    model({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 2}}]}, {"text": "Waited."})
    person = browser(alice)
    outcome: dict[str, Stream] = {}
    first = threading.Thread(target=lambda: outcome.setdefault("first", post(
        port, run_input("t-two", "r-a", said("Wait", "u-a")), person.headers())))
    first.start()
    try:
        wait_for(lambda: AgentStep.objects.filter(tool_name="test_wait").exists(), what="the run's tool call")
        # A new message meanwhile: the panel's rule, one run at a time in a chat.
        other = post(port, run_input("t-two", "r-c", said("Wait", "u-a"), said("And now?", "u-c")),
                     person.headers())
        # The same message under a new runId (a client's retry): attached to the run, not a second run.
        retry = post(port, run_input("t-two", "r-b", said("Wait", "u-a")), person.headers())
    finally:
        first.join(timeout=30)
    assert [event.type for event in other.events] == [EventType.RUN_ERROR]
    assert other.last.code == "run_active"
    verified(retry.events)
    assert retry.events[0].metadata["mode"] == "attached" and text_of(retry) == "Waited."
    assert text_of(outcome["first"]) == "Waited."
    assert AgentRun.objects.count() == 1


# --- members -----------------------------------------------------------------------------------------


def test_a_members_run_is_a_subagent_and_its_approval_an_interrupt_attributed_to_it(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    chore = Task.objects.create(project=home, title="Old chore", created_by=alice)
    made = token_create(owner=alice, name="Copilot", spec="test-asker")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": f"Delete the task {chore.pk}."})]),
        openai_stream(["Deleting it."], [("k1", "tracker_task_delete", {"pk": chore.pk})]),
    )

    first = post(port, run_input("t-tree", "r-1", said("delete the old chore")), bearer(made.secret))

    verified(first.events)
    [member] = first.of(EventType.SUBAGENT_STARTED)
    ask = next(event for event in first.of(EventType.TOOL_CALL_START) if event.tool_call_name == "ask_test-clerk")
    assert (member.name, member.parent_tool_call_id) == ("test-clerk", ask.tool_call_id)
    assert member.subagent_run_id == f"run-{AgentRun.objects.get(spec='test-clerk').pk}"
    delete = next(event for event in first.of(EventType.TOOL_CALL_START)
                  if event.tool_call_name == "tracker_task_delete")
    assert delete.subagent_run_id == member.subagent_run_id  # the member's own call, attributed to it
    member_text = [event for event in first.of(EventType.TEXT_MESSAGE_CONTENT)
                   if event.subagent_run_id == member.subagent_run_id]
    assert "".join(event.delta for event in member_text) == "Deleting it."
    [question] = interrupted(first)
    assert question.subagent_run_id == member.subagent_run_id and question.tool_call_id == delete.tool_call_id
    assert question.message.startswith("Delete the task “Old chore”")
    [suspended] = first.of(EventType.SUBAGENT_FINISHED)
    assert suspended.outcome.type == "suspended" and suspended.outcome.interrupt_ids == [question.id]
    assert Task.objects.filter(pk=chore.pk).exists()

    fake_openai.queue(openai_stream(["Deleted it."]), openai_stream(["The clerk deleted the old chore."]))
    answered = post(port, resume("t-tree", "r-2", question.id), bearer(made.secret))

    verified(answered.events)
    # The member goes on in this run: announced again, its result and words, its end, then the asking step's.
    assert [event.subagent_run_id for event in answered.of(EventType.SUBAGENT_STARTED)] == [member.subagent_run_id]
    [done] = answered.of(EventType.SUBAGENT_FINISHED)
    assert done.outcome.type == "success" and done.result == "Deleted it."
    outcome = results(answered)
    assert outcome[delete.tool_call_id]["took_effect"] is True
    assert outcome[ask.tool_call_id]["status"] == "answered"
    kinds = [(event.type, getattr(event, "tool_call_id", None)) for event in answered.events]
    assert kinds.index((EventType.SUBAGENT_FINISHED, None)) < kinds.index((EventType.TOOL_CALL_RESULT,
                                                                           ask.tool_call_id))
    texts_as_recorded(first)
    texts_as_recorded(answered)
    top_text = "".join(event.delta for event in answered.of(EventType.TEXT_MESSAGE_CONTENT)
                       if event.subagent_run_id is None)
    assert top_text == "The clerk deleted the old chore."
    succeeded(answered)
    assert not Task.objects.filter(pk=chore.pk).exists()
    top = AgentRun.objects.get(parent__isnull=True)
    assert (top.status, top.client_name, top.client_token_id) == ("succeeded", "Copilot", made.token.pk)


# --- a member answering the person (a handoff) ------------------------------------------------------------
#
# `test-desk` (projects) hands task work to `test-clerk`, and lets a member it asks alone answer the person itself
# (tests/settings.py); both models are the fake provider's. A token acts as the desk: a thread's assistant is its
# token's.


def model_calls(run: AgentRun) -> int:
    return run.steps.filter(kind=AgentStep.Kind.MODEL_CALL).count()


def said_once(stream: Stream, answer: str) -> Any:
    """The one text message of the stream, which carries `answer` whole: started, said and ended once."""
    [start] = stream.of(EventType.TEXT_MESSAGE_START)
    [end] = stream.of(EventType.TEXT_MESSAGE_END)
    assert end.message_id == start.message_id and text_of(stream) == answer
    texts_as_recorded(stream)
    return start


def reloaded_answers(port: int, thread: str, message: UserMessage, secret: str, answer: str) -> list[tuple[str, Any]]:
    """The thread reloaded (no new message): each message of its snapshot that carries `answer`, with the subagent
    it is attributed to."""
    reload = post(port, run_input(thread, f"{thread}-reload", message), bearer(secret))
    verified(reload.events)
    [snapshot] = reload.of(EventType.MESSAGES_SNAPSHOT)
    return [(each.id, each.subagent_run_id) for each in snapshot.messages
            if isinstance(each, AssistantMessage) and each.content == answer]


def test_a_member_asked_alone_answers_once_as_its_own_text_with_its_steps_as_a_subagents(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the fence", created_by=alice)
    made = token_create(owner=alice, name="Copilot", spec="test-desk")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "List the person's open tasks."})]),
        openai_stream([], [("k1", "tracker_task_list", {})]),
        openai_stream(["You have one open task: ", "Fix the fence."]),
    )
    # Two questions in one: no one tool plainly fits it, so the desk's model decides, and asks the clerk alone.
    asked = said("What's left for me to do this week, and is anything overdue?", "u-hand")

    stream = post(port, run_input("t-hand", "r-1", asked), bearer(made.secret))

    verified(stream.events)
    top = AgentRun.objects.get(parent__isnull=True)
    clerk = AgentRun.objects.get(parent=top)
    answer = "You have one open task: Fix the fence."
    assert (top.reply, top.answered_by_id, model_calls(top), model_calls(clerk)) == (answer, clerk.pk, 1, 2)
    # The answer is said once: as the clerk's text, attributed to it, and not again as the desk's reply.
    [member] = stream.of(EventType.SUBAGENT_STARTED)
    assert said_once(stream, answer).subagent_run_id == member.subagent_run_id == f"run-{clerk.pk}"
    # The clerk is a subagent asked by the desk's call, its own call a step of its own, attributed to it.
    calls = {event.tool_call_name: event for event in stream.of(EventType.TOOL_CALL_START)}
    assert (member.name, member.parent_tool_call_id) == ("test-clerk", calls["ask_test-clerk"].tool_call_id)
    assert calls["ask_test-clerk"].subagent_run_id is None
    assert calls["tracker_task_list"].subagent_run_id == member.subagent_run_id
    assert {(event.step_name, event.subagent_run_id) for event in stream.of(EventType.STEP_STARTED)} == {
        ("tracker_task_list #2", member.subagent_run_id), ("ask_test-clerk #2", None)}
    outcomes = results(stream)
    assert [row["title"] for row in outcomes[calls["tracker_task_list"].tool_call_id]["data"]["results"]] == [
        "Fix the fence"]
    assert outcomes[calls["ask_test-clerk"].tool_call_id]["hands_over"] is True
    [done] = stream.of(EventType.SUBAGENT_FINISHED)
    assert (done.outcome.type, done.result) == ("success", answer)
    end = succeeded(stream)
    assert end.result == {"reply": answer}
    assert (end.metadata["answeredBy"], end.metadata["member"]) == (member.subagent_run_id, "test-clerk")
    # A reload shows the answer once too: the clerk's message, under the id the stream gave it.
    assert reloaded_answers(port, "t-hand", asked, made.secret, answer) == [
        (said_once(stream, answer).message_id, member.subagent_run_id)]


def test_a_request_routed_to_its_member_with_no_model_call_answers_once_as_that_members_run(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    made = token_create(owner=alice, name="Copilot", spec="test-desk")
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Buy milk"})]),
        openai_stream(["Added “Buy milk” to Home."]),
    )
    asked = said("Add the task 'Buy milk' to the project 'Home'", "u-route")

    stream = post(port, run_input("t-route", "r-1", asked), bearer(made.secret))

    verified(stream.events)
    # The desk's run became the clerk's (it plainly adds a task): one run, only the clerk's model asked.
    [run] = AgentRun.objects.all()
    answer = "Added “Buy milk” to Home."
    assert (run.spec, run.routed_from, run.reply, model_calls(run), len(fake_openai.bodies)) == (
        "test-clerk", "test-desk", answer, 2, 2)
    # Why, as the run's first event after it started; then the clerk's own call and text, said once, as the run's.
    [notice] = [event for event in stream.of(EventType.CUSTOM) if event.name == event_names.NOTICE]
    assert notice.value["text"] == "routed to test-clerk: intent tracker_task_create, the only member that may do it"
    assert stream.events.index(notice) < stream.events.index(stream.of(EventType.TOOL_CALL_START)[0])
    assert not stream.of(EventType.SUBAGENT_STARTED)
    [create] = stream.of(EventType.TOOL_CALL_START)
    assert (create.tool_call_name, create.subagent_run_id) == ("tracker_task_create", None)
    assert results(stream)[create.tool_call_id]["took_effect"] is True
    assert said_once(stream, answer).subagent_run_id is None
    end = succeeded(stream)
    assert end.metadata["member"] == "test-clerk" and "answeredBy" not in end.metadata
    assert Task.objects.filter(project=home, title="Buy milk").count() == 1
    assert reloaded_answers(port, "t-route", asked, made.secret, answer) == [
        (said_once(stream, answer).message_id, None)]


def test_a_member_answering_the_person_after_an_approval_answers_once_in_the_resumed_run(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    chore = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Old chore",
                                created_by=alice)
    made = token_create(owner=alice, name="Copilot", spec="test-desk")
    # Words that point rather than name ("that"): the desk's model decides, and asks the clerk alone.
    fake_openai.queue(openai_stream([], [("d1", "ask_test-clerk", {"task": "Delete the task 'Old chore'."})]),
                      openai_stream([], [("k1", "tracker_task_delete", {"pk": chore.pk})]))
    asked = said("Get rid of that old chore for me", "u-ask")

    first = post(port, run_input("t-ask-first", "r-1", asked), bearer(made.secret))

    verified(first.events)
    [question] = interrupted(first)
    [member] = first.of(EventType.SUBAGENT_STARTED)
    assert question.subagent_run_id == member.subagent_run_id and not first.of(EventType.TEXT_MESSAGE_START)

    fake_openai.queue(openai_stream(["Deleted “Old chore”."]))
    answered = post(port, resume("t-ask-first", "r-2", question.id), bearer(made.secret))

    verified(answered.events)
    answer = "Deleted “Old chore”."
    assert said_once(answered, answer).subagent_run_id == member.subagent_run_id
    assert succeeded(answered).result == {"reply": answer}
    assert not Task.objects.filter(pk=chore.pk).exists()
    top = AgentRun.objects.get(parent__isnull=True)
    assert (top.reply, top.answered_by_id, model_calls(top)) == (answer, AgentRun.objects.get(parent=top).pk, 1)


def test_a_routed_request_that_needs_an_approval_is_the_members_own_interrupt_and_answers_once_when_resumed(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    chore = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Old chore",
                                created_by=alice)
    made = token_create(owner=alice, name="Copilot", spec="test-desk")
    fake_openai.queue(openai_stream([], [("k1", "tracker_task_delete", {"pk": chore.pk})]))
    asked = said("Delete the task 'Old chore'", "u-routed-ask")

    first = post(port, run_input("t-routed-ask", "r-1", asked), bearer(made.secret))

    verified(first.events)
    [question] = interrupted(first)
    [run] = AgentRun.objects.all()
    assert (run.spec, run.routed_from, run.status) == ("test-clerk", "test-desk", "awaiting_confirmation")
    assert question.subagent_run_id is None and not first.of(EventType.SUBAGENT_STARTED)
    assert Task.objects.filter(pk=chore.pk).exists()

    fake_openai.queue(openai_stream(["Deleted “Old chore”."]))
    answered = post(port, resume("t-routed-ask", "r-2", question.id), bearer(made.secret))

    verified(answered.events)
    answer = "Deleted “Old chore”."
    assert said_once(answered, answer).subagent_run_id is None
    assert succeeded(answered).metadata["member"] == "test-clerk"
    assert not Task.objects.filter(pk=chore.pk).exists()
    run.refresh_from_db()
    assert (run.status, run.reply, model_calls(run), len(fake_openai.bodies)) == ("succeeded", answer, 2, 2)


# --- who may ask ---------------------------------------------------------------------------------------


def test_the_session_needs_its_csrf_token_and_nobody_signed_in_is_answered_401(
    port: int, model: Callable[..., None], alice: Any
) -> None:
    person = browser(alice)
    body = run_input("t-csrf", "r-1", said("Hello"))

    without = post(port, body, person.headers(with_csrf=False))
    wrong = post(port, body, {**person.headers(), "X-CSRFToken": "x" * 32})
    cross_site = post(port, body, {**person.headers(), "Origin": "https://evil.example"})
    nobody = post(port, body, {})

    for refused in (without, wrong, cross_site):
        assert refused.status == 403 and refused.json["error"] == "csrf_failed", refused.body
        assert "X-CSRFToken" in refused.json["message"]
    assert nobody.status == 401 and nobody.json["error"] == "unauthorized"
    assert nobody.headers["www-authenticate"].startswith("Bearer")
    assert not AgentRun.objects.exists() and not AguiRun.objects.exists()


def test_an_access_token_works_instead_of_the_session_and_a_read_only_one_never_writes(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    writer = token_create(owner=alice, name="Copilot", spec="default")
    careful = token_create(owner=alice, name="Careful", spec="default", read_only=True)
    model({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "by token"}}]}, {"text": "Recorded."})

    # No cookie and no CSRF token: the bearer is the credential.
    wrote = post(port, run_input("t-token", "r-1", said("Record it")), bearer(writer.secret))

    verified(wrote.events)
    assert text_of(wrote) == "Recorded." and list(results(wrote).values())[0]["took_effect"] is True
    assert Effect.objects.filter(label="by token", owner=alice).count() == 1
    run = AgentRun.objects.get()
    assert (run.channel, run.client_name, run.config["agui"]["auth"]) == ("panel", "Copilot", "token")

    model({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "sneaky"}}]}, {"text": "Could not."})
    read_only = post(port, run_input("t-careful", "r-2", said("Record it")), bearer(careful.secret))

    verified(read_only.events)
    [outcome] = results(read_only).values()
    assert outcome["took_effect"] is False and outcome["status"] != "done"
    assert not Effect.objects.filter(label="sneaky").exists()
    careful_run = AgentRun.objects.get(client_name="Careful")
    assert careful_run.config["permission_profile"] == "restricted"

    # A token of another assistant cannot continue the thread, nor a revoked token at all.
    reader = token_create(owner=alice, name="Reader", spec="reader")
    other_spec = post(port, run_input("t-token", "r-3", said("More")), bearer(reader.secret))
    assert other_spec.last.code == "token_spec"
    token_revoke(owner=alice, token_id=writer.token.pk)
    revoked = post(port, run_input("t-token", "r-4", said("Again")), bearer(writer.secret))
    assert revoked.status == 401 and revoked.headers["www-authenticate"].startswith("Bearer")
    assert AgentRun.objects.count() == 2


def test_a_read_only_token_cannot_approve_an_interrupt(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    careful = token_create(owner=alice, name="Careful", spec="default", read_only=True)
    model({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]}, {"text": "Done."})
    asked = post(port, run_input("t-ask", "r-1", said("Delete Garden", "u")), browser(alice).headers())
    [question] = interrupted(asked)

    # The thread is the session's (spec "default", as the token's), but a read-only token approves nothing.
    refused = post(port, resume("t-ask", "r-2", question.id), bearer(careful.secret))

    assert refused.last.code == "read_only"
    assert Project.objects.filter(pk=garden.pk).exists()
    assert AgentRun.objects.get().status == "awaiting_confirmation"


def test_a_read_only_token_cannot_talk_to_an_assistant_that_hands_work_to_members(
    port: int, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer, alice: Any
) -> None:
    """A member's run takes its own spec's profile, not the token's read-only narrowing: such a thread is
    refused before anything is stored, even when the request would only read."""
    made = token_create(owner=alice, name="Careful", spec="test-asker", read_only=True)
    fake_openai.queue(openai_stream(["You have no tasks."]))

    refused = post(port, run_input("t-ro-tree", "r-1", said("what are my tasks?")), bearer(made.secret))

    assert refused.status == 200
    assert [event.type for event in refused.events] == [EventType.RUN_ERROR]
    assert refused.last.code == "read_only" and "members" in refused.last.message
    assert not AgentRun.objects.exists() and not AguiRun.objects.exists()
    assert not AgentChat.objects.filter(owner=alice).exists()
    assert fake_openai.requests == []


def test_revoking_a_token_ends_its_run_that_waits_for_an_approval(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    made = token_create(owner=alice, name="Copilot", spec="default")
    model({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": garden.pk}}]}, {"text": "Done."})
    [question] = interrupted(post(port, run_input("t-revoke", "r-1", said("Delete Garden")), bearer(made.secret)))

    token_revoke(owner=alice, token_id=made.token.pk)

    run = AgentRun.objects.get()
    assert (run.status, run.stop_reason) == ("cancelled", "token_revoked")
    assert post(port, resume("t-revoke", "r-2", question.id), bearer(made.secret)).status == 401
    # The person, in their browser, finds it ended: the interrupt is stale, the project is there.
    late = post(port, resume("t-revoke", "r-3", question.id), browser(alice).headers())
    assert late.last.code == "stale_confirmation"
    assert Project.objects.filter(pk=garden.pk).exists()


def test_revoking_a_token_stops_its_run_at_the_next_step_while_a_worker_works_on_it(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    made = token_create(owner=alice, name="Copilot", spec="default")
    model({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 2}}]},
          {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "after the revoke"}}]},
          {"text": "Done."})
    answers: list[Any] = []
    asking = threading.Thread(target=lambda: answers.append(
        post(port, run_input("t-mid", "r-1", said("Wait, then record")), bearer(made.secret))))
    asking.start()
    wait_for(lambda: AgentStep.objects.filter(tool_name="test_wait").exists(), what="the first tool call to start")

    token_revoke(owner=alice, token_id=made.token.pk)  # live authority: the token is checked again, not remembered

    asking.join(timeout=60)
    run = AgentRun.objects.get()
    assert (run.status, run.stop_reason) == ("cancelled", "token_revoked"), run.error
    assert "revoked" in run.error
    assert not Effect.objects.filter(label="after the revoke").exists()
    assert not AgentStep.objects.filter(tool_name="test_record_effect").exists()
    assert answers and answers[0].last is not None


def test_the_page_a_frontend_asks_from_is_the_panels_page_context(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any, bob: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model({"text": "That is Home."})
    body = run_input("t-page", "r-1", said("what is this?"))
    body["forwardedProps"] = {"page": f"/tracker/projects/{home.pk}/"}

    verified(post(port, body, browser(alice).headers()).events)
    assert AgentRun.objects.get().config["page"]["label"] == f"the project “Home” (#{home.pk})"

    # Another person's project's path gives their run nothing; what is no path is refused, nothing stored.
    model({"text": "Which one?"})
    body = run_input("t-page-bob", "r-1", said("what is this?"))
    body["forwardedProps"] = {"page": f"/tracker/projects/{home.pk}/"}
    verified(post(port, body, browser(bob).headers()).events)
    assert "page" not in AgentRun.objects.get(owner=bob).config
    body = run_input("t-page-bad", "r-2", said("what is this?"))
    body["forwardedProps"] = {"page": "https://elsewhere.example/"}
    refused = post(port, body, browser(bob).headers()).last
    assert refused.code == "bad_page", refused.message
    assert AgentRun.objects.count() == 2


# --- bad input ------------------------------------------------------------------------------------------


BAD_BODIES: dict[str, tuple[bytes, int, str]] = {
    "not JSON": (b"{threadId: 1", 400, "bad_json"),
    "not UTF-8": (b'{"threadId": "\xff"}', 400, "bad_json"),
    "an array": (b"[]", 400, "bad_input"),
    "NaN": (b'{"threadId": "t", "runId": "r", "messages": [], "state": NaN}', 400, "bad_json"),
    "1e400": (b'{"threadId": "t", "runId": "r", "messages": [], "state": 1e400}', 400, "bad_json"),
    "nested too deep": (b'{"state": ' + b"[" * 100 + b"]" * 100 + b"}", 400, "bad_json"),
    "nested past the parser": (b'{"state": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "bad_json"),
    "a lone surrogate": (b'{"threadId": "\\ud800", "runId": "r", "messages": []}', 400, "bad_json"),
    "no threadId": (b'{"runId": "r", "messages": []}', 422, "bad_input"),
    "messages not a list": (b'{"threadId": "t", "runId": "r", "messages": {}}', 422, "bad_input"),
    "a message of no role": (b'{"threadId": "t", "runId": "r", "messages": [{"id": "m", "content": "x"}]}',
                             422, "bad_input"),
    "an empty runId": (b'{"threadId": "t", "runId": " ", "messages": []}', 422, "bad_input"),
    "NUL in threadId": (b'{"threadId": "t\\u0000", "runId": "r", "messages": []}', 422, "bad_input"),
    "a threadId of 201 characters": (json.dumps({"threadId": "t" * 201, "runId": "r", "messages": []}).encode(),
                                     422, "bad_input"),
}


@pytest.mark.parametrize("name", BAD_BODIES)
def test_what_is_not_a_run_agent_input_is_a_4xx_json_answer(port: int, alice: Any, name: str) -> None:
    raw, status, code = BAD_BODIES[name]

    answer = post(port, None, browser(alice).headers(), raw=raw)

    assert answer.status == status and answer.json["error"] == code, answer.body
    assert answer.json["message"]
    assert not AgentRun.objects.exists()


def test_other_methods_and_media_types_are_refused_in_json(port: int, alice: Any) -> None:
    get = httpx2.get(f"http://127.0.0.1:{port}{PATH}", headers=browser(alice).headers())
    form = post(port, None, browser(alice).headers(), raw=b"threadId=t",
                content_type="application/x-www-form-urlencoded")
    huge = post(port, None, browser(alice).headers(), raw=b'{"x": "' + b"x" * 3_000_000 + b'"}')

    assert get.status_code == 405 and get.json()["error"] == "method_not_allowed" and get.headers["allow"] == "POST"
    assert form.status == 415 and form.json["error"] == "bad_content_type"
    assert huge.status == 413 and huge.json["error"] == "too_large"


def test_a_run_agent_input_the_assistant_refuses_is_a_run_error(
    port: int, model: Callable[..., None], alice: Any
) -> None:
    person = browser(alice)
    cases = {
        "empty_message": run_input("t-bad", "r-1", said("   ")),
        "bad_request": run_input("t-bad", "r-2", UserMessage(id="img", content=[
            {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png",
                                          "mimeType": "image/png"}}])),
        "not_found": resume("t-none", "r-3", "approval-1"),
    }
    for code, body in cases.items():
        refused = post(port, body, person.headers())
        assert refused.status == 200, refused.body
        assert [event.type for event in refused.events] == [EventType.RUN_ERROR], code
        assert refused.last.code == code and refused.last.message
    # A new thread without a message: nothing to answer.
    empty = post(port, run_input("t-empty", "r-4"), person.headers())
    assert empty.last.code == "empty_message"
    assert not AgentRun.objects.exists()


def test_a_file_in_the_input_is_the_persons_attachment_sent_with_the_message_and_one_not_taken_is_refused(
    port: int, model: Callable[..., None], alice: Any
) -> None:
    from assistant.models import AgentAttachment

    model({"text": "Two tasks."})
    person = browser(alice)
    csv = b"title\nBuy milk\nFix the fence\n"
    given = post(port, run_input("t-file", "r-1", UserMessage(id="m-file", content=[
        {"type": "text", "text": "what is in this?"},
        {"type": "document", "source": {"type": "data", "value": base64.b64encode(csv).decode(),
                                         "mimeType": "text/csv"}, "metadata": {"filename": "tasks.csv"}}])),
        person.headers())
    assert verified(given.events)[-1].type == EventType.RUN_FINISHED
    [attachment] = AgentAttachment.objects.filter(owner=alice)
    assert (attachment.name, attachment.content_type, attachment.size) == ("tasks.csv", "text/csv", len(csv))
    assert attachment.message.content == "what is in this?"

    # A file of a type not taken: refused as the panel's upload is, nothing stored, no run.
    refused = post(port, run_input("t-file-2", "r-2", UserMessage(id="m-exe", content=[
        {"type": "document", "source": {"type": "data", "value": base64.b64encode(b"MZ\x90\x00\x03").decode(),
                                         "mimeType": "application/octet-stream"},
         "metadata": {"filename": "program.exe"}}])), person.headers())
    assert [event.type for event in refused.events] == [EventType.RUN_ERROR]
    assert refused.last.code == "unsupported_type" and AgentAttachment.objects.count() == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12)
messages = st.lists(st.fixed_dictionaries({"id": st.one_of(st.text(max_size=20), json_values)}, optional={
    "role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "developer", "reasoning"]),
                      json_values),
    "content": st.one_of(st.text(max_size=40), json_values,
                         st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "x"]),
                                                         "text": st.text(max_size=10)}), max_size=2)),
    "toolCallId": json_values, "toolCalls": json_values}), max_size=3)
inputs = st.fixed_dictionaries({}, optional={
    "threadId": st.one_of(st.text(max_size=30), json_values), "runId": st.one_of(st.text(max_size=30), json_values),
    "messages": st.one_of(messages, json_values), "tools": json_values, "context": json_values,
    "state": json_values, "forwardedProps": json_values, "parentRunId": json_values,
    "resume": st.one_of(json_values, st.lists(st.fixed_dictionaries({
        "interruptId": st.one_of(st.sampled_from(["approval-1", "approval-x", "approval-" + "9" * 30]),
                                 st.text(max_size=20)),
        "status": st.one_of(st.sampled_from(["resolved", "cancelled"]), json_values),
        "payload": json_values}), max_size=2)),
})
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    inputs.map(lambda value: json.dumps(value).encode()),
)
FUZZ = hypothesis_settings(max_examples=120, deadline=None, derandomize=True,
                           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(body=bodies, authenticated=st.booleans())
def test_fuzzed_bodies_are_answered_by_the_protocol_never_a_server_error(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any, body: bytes,
    authenticated: bool
) -> None:
    """Whatever a client posts: a 4xx JSON answer with a message, or a stream of the protocol's events that
    opens with RUN_STARTED (or is one RUN_ERROR) and ends — never a 500, never a body the protocol cannot read."""
    model(*[{"text": "ok"}] * 3)
    answer = post(port, None, browser(alice).headers() if authenticated else {}, raw=body, timeout=60)

    assert answer.status < 500, answer.body
    if answer.status == 200:
        verified(answer.events)
        assert answer.last.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    else:
        assert 400 <= answer.status < 500 and answer.json["error"] and answer.json["message"]


# --- the record -----------------------------------------------------------------------------------------


def test_each_ag_ui_run_is_the_panels_record_with_its_steps_in_the_admin(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any, admin_user: Any
) -> None:
    from registry.models import AgentProfile

    Project.objects.create(owner=alice, name="Garden")
    model({"tool_calls": [{"name": "tracker_project_list", "arguments": {}}]}, {"text": "You have Garden."})

    stream = post(port, run_input("t-record", "r-record", said("My projects?")), browser(alice).headers())

    succeeded(stream)
    run = AgentRun.objects.get()
    assert (run.status, run.channel, run.tool_calls, run.reply) == ("succeeded", "panel", 1, "You have Garden.")
    assert run.session_digest  # it acted with the person's session, as a panel run does
    assert [step.tool_name for step in run.steps.filter(kind="tool_call")] == ["tracker_project_list"]
    staff = BrowserClient()
    staff.force_login(admin_user)
    page = staff.get(f"/admin/assistant/agentrun/{run.pk}/change/").content.decode()
    assert "tracker_project_list" in page and "You have Garden." in page
    rows = staff.get("/admin/assistant_agui/aguirun/").content.decode()
    assert "r-record" in rows and f"/admin/assistant/agentrun/{run.pk}/change/" in rows
    # The chat is the person's, in their panel's list like any other they talk in.
    assert run.chat.channel == "panel" and run.chat.title == "My projects?"
    assert AgentProfile.objects.get(owner=alice, spec_name=run.spec).invocations == 1


def test_a_resume_may_approve_with_changed_values_and_one_that_does_not_fit_runs_nothing(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    model({"tool_calls": [{"name": "test_task_change", "arguments": {"pk": task.pk, "title": "Buy mlk"}}]},
          {"text": "Renamed."})
    person = browser(alice)
    first = post(port, run_input("t-edit", "r-1", said("rename it", "m-edit")), person.headers())
    [question] = interrupted(first)
    assert question.response_schema["properties"]["arguments"]["type"] == "object"
    assert question.metadata["arguments"] == {"pk": task.pk, "title": "Buy mlk"}

    unfit = post(port, resume("t-edit", "r-2", question.id, arguments={"pk": task.pk, "title": ["Buy", "milk"]}),
                 person.headers())

    verified(unfit.events)
    [error] = unfit.of(EventType.RUN_ERROR)
    assert error.code == "invalid_arguments" and "title" in error.message
    assert Task.objects.get(pk=task.pk).title == "Fix the tap"
    assert AgentRun.objects.get().status == "awaiting_confirmation"

    fixed = post(port, resume("t-edit", "r-3", question.id, arguments={"pk": task.pk, "title": "Buy milk"}),
                 person.headers())

    verified(fixed.events)
    assert succeeded(fixed).result == {"reply": "Renamed."}
    assert Task.objects.get(pk=task.pk).title == "Buy milk"
    step = AgentStep.objects.get(tool_name="test_task_change")
    assert (step.arguments["title"], step.asked_arguments["title"]) == ("Buy milk", "Buy mlk")


def test_a_run_that_leaves_little_of_the_allowance_says_how_much_in_its_end(
    port: int, model: Callable[..., None], celery_worker: WorkerProcess, alice: Any
) -> None:
    from django.utils import timezone

    from assistant.models import AgentAllowance, AgentChat

    AgentAllowance.objects.create(user=alice, tokens_per_day=60_000)
    model({"text": "Plenty."})
    plenty = post(port, run_input("t-plenty", "r-1", said("hello")), browser(alice).headers())
    assert "allowance" not in (succeeded(plenty).metadata or {})
    # 47,000 used earlier today: under a quarter of the 60,000 is left.
    AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), spec="default",
                            status="succeeded", total_tokens=47_000, profile_recorded_at=timezone.now())
    model({"text": "Little left."})
    little = post(port, run_input("t-little", "r-2", said("hello")), browser(alice).headers())

    verified(little.events)
    assert re.fullmatch(r"[\d,]+ tokens are left of your daily allowance of 60,000 tokens\. It resets at midnight "
                        r"\((in \d+ h|in under an hour)\)\.", succeeded(little).metadata["allowance"])


def test_a_message_past_the_persons_allowance_is_a_run_error_saying_when_it_resets(
    port: int, model: Callable[..., None], alice: Any
) -> None:
    from assistant.models import AgentAllowance

    AgentAllowance.objects.create(user=alice, tokens_per_day=100)  # less than one answer of the model
    refused = post(port, run_input("t-spent", "r-1", said("what are my open tasks?")), browser(alice).headers())

    assert refused.status == 200, refused.body
    assert [event.type for event in refused.events] == [EventType.RUN_ERROR]
    assert refused.last.code == "allowance_spent"
    assert refused.last.message.startswith("What is left of your daily allowance of 100 tokens for the assistant is "
                                           "too little for another answer. It resets at midnight")
    assert not AgentRun.objects.exists()
