"""A worker process is ready for its first turn: the configured model's SDK and the embedder are loaded
when the process starts, not inside the first person's turn (`import anthropic` alone takes a second
or more on a small machine; the MiniLM weights a third of one)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.models import AgentRun, AgentStep
from assistant.testing.providers import FakeAnthropicServer
from tests.conftest import (
    PROJECT_DIR,
    WorkerProcess,
    _test_database_url,
    assistant_settings_with,
    site_worker,
    stop_every_sweeper,
    wait_for_run,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

MODEL = "anthropic:fake-claude"


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
def anthropic_worker(anthropic_server: FakeAnthropicServer, django_db_blocker: Any) -> Iterator[WorkerProcess]:
    """A fresh worker (new processes, nothing imported yet) configured for `anthropic:` against the fake
    server; the only worker on the test database while the test runs."""
    stop_every_sweeper()
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "ASSISTANT_MODEL": MODEL, "ANTHROPIC_BASE_URL": anthropic_server.base_url,
           "ANTHROPIC_API_KEY": "sk-ant-test"}
    worker = site_worker(env, f"warmup-worker-{os.getpid()}")
    worker.log.unlink(missing_ok=True)
    worker.start()
    try:
        yield worker
    finally:
        worker.wait_idle()
        worker.stop()


def send(user: Any, text: str) -> AgentRun:
    with assistant_settings_with(MODEL=MODEL):
        return chat_send(user=user, content=text, new_chat=True).run


# What a turn's first model call pays when its process has not loaded the SDK: the import and the client.
LOAD_THE_SDK = """
import time
started = time.perf_counter()
import anthropic
anthropic.Anthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9", max_retries=0)
print((time.perf_counter() - started) * 1000)
"""


def sdk_load_ms() -> float:
    """Milliseconds a fresh process on this machine takes, now, to load the SDK as a first turn would."""
    done = subprocess.run([sys.executable, "-c", LOAD_THE_SDK], cwd=PROJECT_DIR, capture_output=True, text=True,
                          check=True, timeout=120)
    return float(done.stdout)


def model_call_ms(run: AgentRun) -> int:
    [step] = AgentStep.objects.filter(run=run, kind="model_call")
    assert step.duration_ms is not None
    return int(step.duration_ms)


def test_a_fresh_worker_process_has_the_configured_sdk_and_embedder_loaded_before_any_turn(
    anthropic_worker: WorkerProcess,
) -> None:
    from tests.testapp.tasks import process_state

    state = process_state.delay().get(timeout=60)
    assert state["pid"] != os.getpid()
    assert state["anthropic"] is True, "the pool process would import the anthropic SDK inside its first turn"
    assert state["local_embedder_loaded"] is True, "the first turn would load the embedder's weights"
    assert state["turn_modules"] is True, "the first turn would import the turn's own modules"
    # Only what is configured: the openai SDK is not paid for by a worker that has no use for it.
    assert state["openai"] is False
    # Nor the web server's Twisted, which daphne's app would install in every process that loads the settings.
    assert state["twisted"] is False
    assert "Worker process ready for its first turn" in anthropic_worker.log.read_text(errors="replace")


def test_a_fresh_workers_first_turn_is_as_quick_as_its_second(
    alice: Any, anthropic_worker: WorkerProcess, anthropic_server: FakeAnthropicServer
) -> None:
    first = wait_for_run(send(alice, "hello").pk, *AgentRun.ENDED_STATUSES, timeout=60)
    second = wait_for_run(send(alice, "hello again").pk, *AgentRun.ENDED_STATUSES, timeout=60)
    assert (first.status, second.status) == ("succeeded", "succeeded"), (first.error, second.error)
    assert len(anthropic_server.requests) == 2
    # Against an instant local server a model call takes milliseconds once the SDK is loaded. Loading it
    # inside the first call would make that call longer than the second by what loading costs a fresh
    # process, timed here on the same machine under the same load (1.1 s or more on a small one).
    first_ms, second_ms, load_ms = model_call_ms(first), model_call_ms(second), sdk_load_ms()
    assert first_ms - second_ms < load_ms / 2, (
        f"the first turn's model call took {first_ms} ms, the second {second_ms} ms; loading the SDK {load_ms:.0f} ms")
