"""Runs a real Celery worker works on, ended every way a turn can end, each counted once in its owner's
profile with the seed's status. (Runs ended outside a turn: test_registry.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

from assistant.access.authority import SentFrom
from assistant.conversation.services import chat_send, run_cancel
from assistant.models import AgentChat, AgentRun
from assistant.tasks import run_turn
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]



def send(user: Any, text: str, model: str, **settings: Any) -> AgentRun:
    with assistant_settings_with(MODEL=model, **settings):
        return chat_send(user=user, content=text, new_chat=True).run


def entry_of(run: AgentRun) -> dict[str, Any]:
    """The run's one entry in its owner's profile (it is written in the transaction that ends the run)."""
    profile = AgentProfile.objects.get(owner_id=run.owner_id, spec_name=run.spec)
    [entry] = [entry for entry in profile.window if entry["run_id"] == run.pk]
    return entry


def test_every_ending_of_a_worked_run_counts_once_in_the_seeds_statuses(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    effect = {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "x"}}]}
    answered = wait_for_run(send(alice, "answer", script(effect, {"text": "done"})).pk, *AgentRun.ENDED_STATUSES)
    limited = wait_for_run(send(alice, "loop", script(effect, effect, effect), MAX_TOOL_CALLS=1).pk,
                           *AgentRun.ENDED_STATUSES)
    slow = script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1.5}}]}, {"text": "late"})
    timed_out = wait_for_run(send(alice, "wait", slow, MAX_WALL_SECONDS=1).pk, *AgentRun.ENDED_STATUSES)
    waiting = wait_for_run(send(alice, "forget x", script(
        {"tool_calls": [{"name": "test_forget_effects", "arguments": {"label": "x"}}]}, {"text": "never"},
    )).pk, "awaiting_confirmation")
    run_cancel(user=alice, run_id=waiting.pk)
    working = send(alice, "wait a while", script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 3}}]},
                                                  {"text": "never"}))
    wait_for(lambda: AgentRun.objects.get(pk=working.pk).steps.filter(kind="tool_call").exists(), what="the tool")
    run_cancel(user=alice, run_id=working.pk)
    stopped = wait_for_run(working.pk, "cancelled")

    ends = {run.pk: (run.status, run.stop_reason) for run in AgentRun.objects.filter(owner=alice)}
    assert ends == {
        answered.pk: ("succeeded", ""), limited.pk: ("failed", "max_tool_calls"),
        timed_out.pk: ("timed_out", "wall_time"), waiting.pk: ("cancelled", "cancelled"),
        stopped.pk: ("cancelled", "cancelled"),
    }
    profile = AgentProfile.objects.get(owner=alice, spec_name="default")
    assert profile.invocations == 5
    assert sorted(entry["run_id"] for entry in profile.window) == sorted(ends)
    statuses = {run_id: entry_of(AgentRun.objects.get(pk=run_id))["status"] for run_id in ends}
    assert statuses == {answered.pk: "success", limited.pk: "error", timed_out.pk: "timeout",
                        waiting.pk: "cancelled", stopped.pk: "cancelled"}
    assert entry_of(answered)["intent"] == "test_record_effect"
    assert entry_of(timed_out)["intent"] == "test_wait"
    assert entry_of(waiting)["tool_errors"] == 1  # the action it waited on was not taken


def test_per_tool_counts_are_per_call_in_a_worked_run(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "one"}},
                        {"name": "test_record_effect", "arguments": {"label": "two"}},
                        {"name": "test_record_effect", "arguments": {}}]},  # no label: refused as invalid
        {"text": "Two of three."},
    )
    run = wait_for_run(send(alice, "three effects", model).pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.tool_calls, run.tool_errors) == ("succeeded", 3, 1)
    profile = AgentProfile.objects.get(owner=alice, spec_name="default")
    assert profile.tool_usage == {"test_record_effect": {"success": 2, "failure": 1}}
    assert entry_of(run)["failed_tools"] == ["test_record_effect"]


def test_a_crashed_turn_counts_once_as_an_error(alice: Any, celery_worker: WorkerProcess) -> None:
    # Settings stored on the run that the turn cannot read (a hand-edited row, a bad migration): the turn
    # raises something no rule of the loop expects, and the crash handler ends the run.
    chat = AgentChat.objects.create(owner=alice)
    run = AgentRun.objects.create(owner=alice, chat=chat, config={"model": "offline", "keep_messages": "many"})
    chat.messages.create(owner=alice, role="user", content="hello", run=run)
    run_turn.delay(run.pk)
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("failed", "internal_error")
    entry = entry_of(run)
    assert entry["status"] == "error"
    assert entry["error_summary"].startswith("Something went wrong inside the assistant")
    assert AgentProfile.objects.get(owner=alice).invocations == 1


def test_a_working_run_whose_session_ended_counts_once_as_cancelled(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    tab = Client()
    tab.force_login(alice)
    key = tab.session.session_key
    model = script({"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 1}}]},
                   {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "late"}}]}, {"text": "never"})
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=alice, content="wait, then record",
                        sent_from=SentFrom(session_key=key, client_address=None, origin="")).run
    wait_for(lambda: AgentRun.objects.get(pk=run.pk).steps.filter(kind="tool_call").exists(), what="the tool")
    Session.objects.filter(session_key=key).delete()  # signed out elsewhere while the run works
    run = wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    assert (run.status, run.stop_reason) == ("cancelled", "session_ended")
    entry = entry_of(run)
    assert (entry["status"], entry["stop_reason"]) == ("cancelled", "session_ended")
    assert AgentProfile.objects.get(owner=alice).invocations == 1
