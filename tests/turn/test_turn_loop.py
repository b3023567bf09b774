"""The run loop in a real Celery worker: tool calls as the user, limits, repair, confirmation, cancel.
A worker killed mid-tool is in tests/faults/test_worker_kill.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assistant.conversation.services import chat_send, run_cancel, run_confirm
from assistant.models import AgentMemory, AgentMessage, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]



def send(user: Any, text: str, model: str, **settings: Any) -> AgentRun:
    with assistant_settings_with(MODEL=model, **settings):
        return chat_send(user=user, content=text).run


def test_a_turn_with_three_tool_calls(alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}}]},
        {"tool_calls": [{"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Buy milk"}},
                        {"name": "tracker_task_list", "arguments": {"search": "milk"}}]},
        {"text": "I recorded it and added “Buy milk” to Home."},
    )
    run = wait_for_run(send(alice, "do three things", model).pk, *AgentRun.ENDED_STATUSES)

    assert run.status == "succeeded", run.error
    assert run.reply == "I recorded it and added “Buy milk” to Home."
    steps = list(run.steps.order_by("seq"))
    assert [(s.kind, s.tool_name) for s in steps] == [
        ("model_call", ""), ("tool_call", "test_record_effect"),
        ("model_call", ""), ("tool_call", "tracker_task_create"), ("tool_call", "tracker_task_list"),
        ("model_call", ""),
    ]
    assert all(step.state == "finished" for step in steps)
    assert [s.took_effect for s in steps if s.kind == "tool_call"] == [True, True, False]
    assert steps[4].result["data"]["results"][0]["title"] == "Buy milk"
    assert (run.model_calls, run.tool_calls, run.tool_errors) == (3, 3, 0)
    assert run.total_tokens == run.prompt_tokens + run.completion_tokens > 0
    assert Task.objects.get(project=home).title == "Buy milk"
    assert Effect.objects.filter(owner=alice, label="one").count() == 1
    # The reply is a message in the chat, the registry has the invocation, and the exchange is remembered.
    assert list(AgentMessage.objects.filter(chat=run.chat).values_list("role", "content")) == [
        ("user", "do three things"), ("assistant", run.reply)
    ]
    # The registry entry is written with the run's end, in the same transaction.
    profile = wait_for(lambda: AgentProfile.objects.filter(owner=alice, spec_name="default").first(),
                       what="the run's registry entry")
    assert profile.invocations == 1
    assert profile.window[0]["status"] == "success"
    assert profile.window[0]["tools_used"] == ["test_record_effect", "tracker_task_create", "tracker_task_list"]
    memory = wait_for(lambda: AgentMemory.objects.filter(owner=alice).first(), what="the memory")
    assert "do three things" in memory.content and run.reply in memory.content
    assert memory.dims == 384


def test_the_steps_so_far_are_on_the_record_while_the_model_works_on_its_next_answer(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    # Writes that follow each other at once share one statement and commit (a model's answer with the first
    # call it asks for, a call's outcome with the next one's start), but none is held back while the model
    # is waited for: the person watches each step as it happens.
    asked = openai_stream(tool_calls=[("c1", "test_record_effect", {"label": "one"}),
                                      ("c2", "test_record_effect", {"label": "two"})])
    slow = openai_stream(["Recorded both."])
    slow.delay = 3.0
    fake_openai.queue(asked, slow)
    run = send(alice, "record two things", "openai:fake-gpt")
    wait_for(lambda: len(fake_openai.requests) == 2, what="the model's second call")

    assert AgentRun.objects.get(pk=run.pk).status == "running"  # the model has not answered yet
    assert list(AgentStep.objects.filter(run=run).order_by("seq").values_list("kind", "state", "took_effect")) == [
        ("model_call", "finished", None), ("tool_call", "finished", True), ("tool_call", "finished", True),
    ]
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.reply, run.model_calls, run.tool_calls) == ("succeeded", "Recorded both.", 2, 2)
    assert list(run.steps.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4]
    assert sorted(Effect.objects.filter(owner=alice).values_list("label", flat=True)) == ["one", "two"]


def test_a_validation_error_goes_back_to_the_model_which_repairs_its_call(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "tracker_task_create", "arguments": {"project": home.pk, "title": ""}}]},
        {"tool_calls": [{"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Fixed"}}]},
        {"text": "Created."},
    )
    run = wait_for_run(send(alice, "add a task", model).pk, *AgentRun.ENDED_STATUSES)
    first, second = run.steps.filter(kind="tool_call").order_by("seq")
    assert first.result["status"] == "invalid"
    assert "title" in first.result["data"]["errors"]
    assert first.took_effect is False
    assert second.result["status"] == "done" and second.took_effect is True
    assert list(Task.objects.values_list("title", flat=True)) == ["Fixed"]
    assert (run.status, run.tool_errors) == ("succeeded", 1)


@pytest.mark.parametrize(
    ("limits", "entries", "status", "stop_reason"),
    [
        ({"MAX_MODEL_CALLS": 2}, 3, "failed", "max_model_calls"),
        ({"MAX_TOOL_CALLS": 2}, 3, "failed", "max_tool_calls"),
        ({"MAX_TOKENS_PER_RUN": 5}, 3, "failed", "max_tokens"),
    ],
)
def test_each_limit_ends_the_run_with_its_reason(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str],
    limits: dict[str, int], entries: int, status: str, stop_reason: str,
) -> None:
    calls = [{"tool_calls": [{"name": "test_record_effect", "arguments": {"label": f"n{i}"}}]} for i in range(entries)]
    run = wait_for_run(send(alice, "x" * 200, script(*calls, {"text": "done"}), **limits).pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == (status, stop_reason)
    assert "stopped" in run.error
    assert not AgentMessage.objects.filter(chat=run.chat, role="assistant").exists()


def test_the_third_identical_call_in_a_row_stops_the_run(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    same = {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "again"}}]}
    run = wait_for_run(send(alice, "loop", script(same, same, same, {"text": "never"})).pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("failed", "repeated_tool_call")
    assert Effect.objects.filter(label="again").count() == 2


def test_wall_time_ends_the_run_as_timed_out(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]}, {"text": "late"})
    run = wait_for_run(send(alice, "wait", model, MAX_WALL_SECONDS=1).pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("timed_out", "wall_time")
    assert run.steps.filter(kind="tool_call", state="finished").count() == 1


def test_confirmation_approved_across_a_worker_restart(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
        {"text": "Deleted Home."},
    )
    run = wait_for_run(send(alice, "delete Home", model).pk, "awaiting_confirmation")
    pending = run.steps.get(state="awaiting_confirmation")
    assert (pending.tool_name, pending.arguments) == ("tracker_project_delete", {"pk": home.pk})
    assert Project.objects.filter(pk=home.pk).exists()

    celery_worker.restart()  # nothing about the question lives in the worker
    run_confirm(user=alice, run_id=run.pk, step_id=pending.pk, approve=True)
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.reply) == ("succeeded", "Deleted Home.")
    assert not Project.objects.filter(pk=home.pk).exists()
    pending.refresh_from_db()
    assert (pending.confirmation, pending.state, pending.took_effect) == ("approved", "finished", True)


def test_confirmation_denied_across_a_worker_restart_tells_the_model_and_changes_nothing(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]},
        {"text": "Understood, I left it."},
    )
    run = wait_for_run(send(alice, "delete Home", model).pk, "awaiting_confirmation")
    celery_worker.restart()
    run_confirm(user=alice, run_id=run.pk, step_id=run.steps.get(state="awaiting_confirmation").pk, approve=False)
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert run.status == "succeeded"
    declined = run.steps.get(kind="tool_call")
    assert declined.result["status"] == "declined" and declined.took_effect is False
    assert Project.objects.filter(pk=home.pk).exists()


def test_a_new_message_supersedes_a_pending_confirmation(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": home.pk}}]})
    first = wait_for_run(send(alice, "delete Home", model).pk, "awaiting_confirmation")
    second = send(alice, "actually, never mind", script({"text": "OK."}))
    first.refresh_from_db()
    assert (first.status, first.stop_reason) == ("cancelled", "superseded")
    assert wait_for_run(second.pk, *AgentRun.ENDED_STATUSES).status == "succeeded"
    assert Project.objects.filter(pk=home.pk).exists()


def test_cancel_while_queued_never_starts(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    celery_worker.stop()
    try:
        model = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "q"}}]})
        run = send(alice, "record", model)
        run_cancel(user=alice, run_id=run.pk)
    finally:
        celery_worker.start()
    celery_worker.caught_up()  # it has taken the run's queued task and finished with it
    run.refresh_from_db()
    assert run.status == "cancelled" and run.steps.count() == 0
    assert not Effect.objects.filter(label="q").exists()


def test_cancel_while_running_stops_at_the_next_step_and_keeps_the_steps(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "after"}}]},
        {"text": "never"},
    )
    run = send(alice, "wait then record", model)
    wait_for(lambda: AgentStep.objects.filter(run=run, kind="tool_call", state="started").exists(), what="the tool")
    run_cancel(user=alice, run_id=run.pk)
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    assert run.steps.filter(kind="tool_call", tool_name="test_wait", state="finished").exists()
    assert not Effect.objects.filter(label="after").exists()
