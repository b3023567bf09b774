"""Traces at a real OTLP receiver: a person's message, through a real worker that exports over OTLP/HTTP as the
OTEL_* variables say, becomes one trace — the send, the asking run's `invoke_agent`, its `chat` calls, the
`execute_tool` that asks a member (whose run, an `invoke_agent` of its own, is a child of the asking run's trace), the
member's tool call, and inside it the site's own Django request for the tool's view. Each span is named and
labelled by the GenAI conventions; the person's words are on none of them unless TRACE_CONTENT says so. With no
exporter configured, the assistant imports nothing of OpenTelemetry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentRun
from assistant.testing.otlp_receiver import OTLPReceiver, ReceivedSpan
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.worker import WorkerProcess
from assistant.tracing import flush, tracing_enabled
from tests.conftest import PROJECT_DIR, assistant_settings_with, site_worker, wait_for_run
from tracker.models import Project, Task


@pytest.fixture(scope="module")
def module_receiver() -> Iterator[OTLPReceiver]:
    """One receiver for the module: this process sets its tracing up once, to send to the first endpoint it is
    given, for good (as a process of the site does)."""
    with OTLPReceiver() as started, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", started.endpoint)
        patch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        tracing_enabled.cache_clear()
        yield started
    tracing_enabled.cache_clear()


@pytest.fixture
def receiver(module_receiver: OTLPReceiver) -> OTLPReceiver:
    """The receiver, and this process's tracing sending to it (the send's span is made here), holding only the
    spans of the test that asks for it."""
    flush()
    module_receiver.clear()
    return module_receiver


def _traced_worker(receiver: OTLPReceiver, session_worker: WorkerProcess, **env: str) -> Iterator[WorkerProcess]:
    """The only worker on the test database while the test runs: one exporting its traces to the receiver."""
    WorkerProcess.stop_all()
    worker = site_worker({**session_worker.env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
                          "OTEL_SERVICE_NAME": "tracker-worker", **env}, f"traced-worker-{os.getpid()}")
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def traced_worker(receiver: OTLPReceiver, session_worker: WorkerProcess) -> Iterator[WorkerProcess]:
    yield from _traced_worker(receiver, session_worker, OTEL_BSP_SCHEDULE_DELAY="50")


@pytest.fixture
def slowly_exporting_worker(receiver: OTLPReceiver, session_worker: WorkerProcess) -> Iterator[WorkerProcess]:
    """A worker whose batches wait ten minutes before they are sent: only its shutdown sends them."""
    yield from _traced_worker(receiver, session_worker, OTEL_BSP_SCHEDULE_DELAY="600000")


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_message_with_a_member_and_a_tool_call_is_one_trace_of_genai_spans(
        alice: Any, receiver: OTLPReceiver, traced_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    fake_openai.queue(
        openai_stream([], [("a1", "ask_test-clerk", {"task": "Add the task 'Buy milk' to the project Home."})],
                      usage=(120, 30)),
        openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Buy milk"})],
                      usage=(200, 40)),
        openai_stream(["Added Buy milk to Home."], usage=(260, 12)),
        openai_stream(["Buy milk is in Home."], usage=(300, 9)),
    )
    chat = AgentChat.objects.create(owner=alice, spec="test-asker")

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        sent = chat_send(user=alice, content="add Buy milk to Home", chat_id=chat.pk)
    top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)
    flush()
    assert top.status == "succeeded", top.error
    assert Task.objects.filter(project=home, title="Buy milk").exists()
    [member] = AgentRun.objects.filter(parent=top)

    def complete(spans: list[ReceivedSpan]) -> bool:
        names = [span.name for span in spans]
        return names.count("invoke_agent test-asker") >= 1 and "invoke_agent test-clerk" in names and \
            "execute_tool tracker_task_create" in names and any(name.startswith("POST") for name in names)

    spans = receiver.wait_for(complete)
    send = _one(spans, "send test-asker")
    asker = _one(spans, "invoke_agent test-asker")
    clerk = _one(spans, "invoke_agent test-clerk")
    tool = _one(spans, "execute_tool tracker_task_create")
    [request] = [span for span in spans if span.name.startswith("POST") and span.parent_id == tool.span_id]
    asked = _one(spans, "ask test-clerk")
    # The view's own queries, by the site's psycopg instrumentation, inside its request: the task's INSERT too.
    queries = [span for span in spans if span.parent_id == request.span_id
               and span.attributes.get("db.system", span.attributes.get("db.system.name")) == "postgresql"]
    assert any(str(span.attributes.get("db.statement", span.attributes.get("db.query.text", ""))).startswith(
        'INSERT INTO "tracker_task"') for span in queries), [span.name for span in queries]
    # One trace, from the send down to the view's own request.
    assert {span.trace_id for span in (send, asker, asked, clerk, tool, request)} == {send.trace_id}
    assert asker.parent_id == send.span_id
    assert clerk.parent_id == asked.span_id and asked.parent_id == asker.span_id
    assert tool.parent_id == clerk.span_id
    chats = [span for span in spans if span.name == "chat openai:fake-gpt"]
    assert sorted(span.parent_id == asker.span_id for span in chats) == [False, False, True, True]
    assert all(span.parent_id in (asker.span_id, clerk.span_id) for span in chats)
    # Named and labelled by the GenAI conventions.
    assert asker.attributes == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "test-asker",
                                "gen_ai.agent.id": str(top.pk), "gen_ai.conversation.id": str(chat.pk),
                                "gen_ai.request.model": "openai:fake-gpt"}
    assert clerk.attributes["gen_ai.agent.id"] == str(member.pk)
    assert tool.attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "tracker_task_create",
                               "gen_ai.tool.call.id": tool.attributes["gen_ai.tool.call.id"],
                               "gen_ai.tool.type": "function"}
    first = next(span for span in chats if span.attributes["gen_ai.usage.input_tokens"] == 120)
    assert first.attributes | {} == {"gen_ai.operation.name": "chat", "gen_ai.request.model": "openai:fake-gpt",
                                     "gen_ai.provider.name": "openai", "gen_ai.response.model": "fake-gpt",
                                     "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}
    assert asker.service == "tracker-worker"
    # The person's words are on no span: TRACE_CONTENT is off.
    assert not any("Buy milk" in str(span.attributes) for span in spans if span.name != request.name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_worker_stopped_as_a_process_manager_stops_it_first_sends_the_spans_it_holds(
        alice: Any, receiver: OTLPReceiver, slowly_exporting_worker: WorkerProcess,
        fake_openai: FakeOpenAIServer) -> None:
    # The run's spans are made in a pool process, which exits without Python's exit handlers.
    fake_openai.queue(openai_stream(["Nothing to do."], usage=(50, 5)))
    chat = AgentChat.objects.create(owner=alice, spec="test-asker")
    with assistant_settings_with(MODEL="openai:fake-gpt"):
        sent = chat_send(user=alice, content="hello", chat_id=chat.pk)
    assert wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60).status == "succeeded"
    # The send's span, made in this process, arrives; the run's, made in the worker's pool process, are held.
    flush()
    held = receiver.wait_for(lambda spans: any(span.name == "send test-asker" for span in spans))
    assert not [span for span in held if span.name == "invoke_agent test-asker"]

    slowly_exporting_worker.stop()

    names = [span.name for span in receiver.wait_for(
        lambda spans: any(span.name == "invoke_agent test-asker" for span in spans))]
    assert names.count("invoke_agent test-asker") == 1 and names.count("chat openai:fake-gpt") == 1


def test_with_no_exporter_the_assistant_imports_nothing_of_opentelemetry() -> None:
    """In a process of its own, with no OTEL_* variable and OpenTelemetry made unimportable (other libraries, such
    as redis-py, reach for it when it is installed): the run loop, the tool calls, a send, a run's life and the site's
    worker and web entry points import, a span is opened and labelled, and no module of the assistant or the site
    tried to import it."""
    script = textwrap.dedent("""
        import importlib.abc, sys, traceback
        tried = []

        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] != "opentelemetry":
                    return None
                frames = [frame for frame in traceback.extract_stack() if "importlib" not in frame.filename]
                tried.append(frames[-2].filename if len(frames) > 1 else "?")
                raise ModuleNotFoundError(name)

        sys.meta_path.insert(0, Refuse())
        import django
        django.setup()
        from assistant.tracing import span, tracing_enabled
        with span("nothing") as traced:
            traced.set({"a": 1})
        assert not tracing_enabled()
        import assistant.turn.loop, assistant.turn.calls, assistant.conversation.services, assistant.runs.lifecycle
        import config.celery, config.asgi
        ours = [name for name in tried if "/assistant/" in name or "/config/" in name]
        print("ours:" + ",".join(ours) if ours else "clean")
    """)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_DIR, env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "clean"
