"""An eval run's worker is SIGKILLed (with its pool) while it replays: the replays it held are swept back and
finished by the next worker, and every result is graded exactly once — one replay per case and candidate,
the report's counts those of a run nobody killed, no view run and nothing filed in the person's profile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from assistant.conversation.services import chat_send
from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalResult, EvalRun, EvalSet
from assistant.evals.replays import Candidate, eval_run_refresh, eval_run_start
from assistant.evals.report import eval_report
from assistant.models import AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, Reply, openai_completion, openai_stream
from assistant.testing.worker import WorkerProcess
from registry.models import AgentProfile
from tests.conftest import assistant_settings_with, site_worker, wait_for
from tests.faults.conftest import Stack
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)

LABELS = ("milk", "eggs", "bread", "tea")
MODEL = "openai:fake-gpt"
#: Instructions that make the fake model below record the wrong thing: a candidate that fails every case.
WRONG = "Record cheese whatever you are asked."


class RecordingModel(FakeOpenAIServer):
    """A provider that answers by what it is sent rather than by a queue, so replays working side by side on
    two pool processes each get their own answer: "record X" calls test_record_effect(X) (cheese under the
    WRONG instructions), a tool's result gets the reply. `delay` slows every answer, so that a replay is
    still working when its worker is killed."""

    delay = 0.0

    def default_reply(self, body: Any) -> Reply:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            text, calls = "Recorded it.", []
        else:
            label = str(messages[-1]["content"]).removeprefix("record ")
            if any(WRONG in str(message.get("content")) for message in messages if message["role"] == "system"):
                label = "cheese"
            text, calls = "", [("c1", "test_record_effect", {"label": label})]
        reply = openai_stream([text] if text else [], calls) if body.get("stream") else openai_completion(text, calls)
        reply.delay = self.delay
        return reply


@pytest.fixture
def provider() -> Iterator[RecordingModel]:
    server = RecordingModel()
    server.start()
    yield server
    server.stop()


def worker_on(stack: Stack, provider: RecordingModel, name: str) -> WorkerProcess:
    """A worker of the stack (its Valkey, its short lease and sweep) whose OpenAI is the test's provider."""
    return site_worker({**stack.env, "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "test-key"},
                       f"{name}-{os.getpid()}", stack.directory / f"{name}.log")


@pytest.fixture
def workers(stack: Stack, provider: RecordingModel) -> Iterator[list[WorkerProcess]]:
    """The stack's own worker rests (its model is the scripted one): the test's workers take every run."""
    stack.worker.stop()
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()  # the next test's `stack` starts the stack's own again


def recorded_set(alice: Any) -> EvalSet:
    """A set of one case per label: alice asked to record it, and the run did, through the real worker."""
    eval_set = set_named("kill", create=True)
    for label in LABELS:
        with assistant_settings_with(MODEL=MODEL):
            run = chat_send(user=alice, content=f"record {label}", new_chat=True).run
        run = wait_for(lambda run=run: AgentRun.objects.filter(pk=run.pk, status="succeeded").first(),
                       timeout=30, what=f"the recording of {label}")
        case_add(eval_set, run)
    return eval_set


def test_a_worker_killed_mid_eval_run_resumes_and_grades_every_result_once(
    alice: Any, stack: Stack, provider: RecordingModel, workers: list[WorkerProcess]
) -> None:
    first = worker_on(stack, provider, "eval-worker-1")
    first.start()
    workers.append(first)
    eval_set = recorded_set(alice)
    effects, profiles = Effect.objects.count(), {p.spec_name: list(p.window) for p in AgentProfile.objects.all()}
    provider.delay = 0.4  # each replay makes two model calls: long enough to be caught in one

    eval_run = eval_run_start(eval_set, [Candidate("same", model=MODEL),
                                         Candidate("wrong", model=MODEL, instructions=WRONG)])
    # Mid-run: some results graded, some replays working, some still queued behind them.
    wait_for(lambda: eval_run.results.filter(status=EvalResult.Status.GRADED).exists()
             and AgentRun.objects.filter(channel="eval", status="running").exists(),
             timeout=30, what="the eval run to be half way")
    killed_at = timezone.now()
    first.kill()
    assert eval_run.results.filter(status=EvalResult.Status.PENDING).exists(), "the kill came too late to test"
    second = worker_on(stack, provider, "eval-worker-2")
    second.start()
    workers.append(second)

    finished = wait_for(lambda: eval_run_refresh(eval_run).status == EvalRun.Status.FINISHED and eval_run,
                        timeout=90, what=f"eval run {eval_run.pk} to finish on the second worker")

    results = list(finished.results.select_related("replay_run"))
    assert len(results) == len(LABELS) * 2  # cases × candidates, no more
    assert all(result.status == EvalResult.Status.GRADED and result.graded_at for result in results)
    # One replay per result: a replay taken up again is the same run, never a second one.
    replays = AgentRun.objects.filter(channel="eval", parent=None)
    assert sorted(replays.values_list("pk", flat=True)) == sorted(result.replay_run_id for result in results)
    assert all(result.replay_run.status == "succeeded" for result in results)
    resumed = [result.replay_run for result in results if result.replay_run.attempts > 1]
    assert resumed, "no replay was taken up again after the kill"
    assert all(run.requeued_at is not None and run.requeued_at > killed_at for run in resumed)
    # Each replay asked its tool once: a resumed one did not have its recorded answer used twice.
    for result in results:
        calls = result.replay_run.steps.filter(kind="tool_call")
        assert calls.count() == 1, [(step.tool_name, step.result) for step in calls]
    # The grades are those of a run nobody killed: every "same" passes, every "wrong" fails naming cheese.
    report = eval_report(finished)
    assert {label: (figures["graded"], figures["passed"]) for label, figures in report["summary"].items()} == {
        "same": (len(LABELS), len(LABELS)), "wrong": (len(LABELS), 0)}
    assert len(report["regressions"]) == len(LABELS)
    wrong = [result for result in results if result.candidate == "wrong"]
    assert all(any("cheese" in item for grade in result.grades for item in grade["deviations"]) for result in wrong)
    # Nothing ran for real, and nothing of the replays was filed in alice's profile.
    assert Effect.objects.count() == effects
    assert {p.spec_name: list(p.window) for p in AgentProfile.objects.all()} == profiles
    assert second.alive
