"""A Stop the person sends is never missed, and every step of a run that ended says what really happened to
it: an approved action the run never got to is "not taken", and a question nobody answered is not a "no".

The races are made exact in-process (the turn runs in the test's thread, as a worker runs it, and the Stop
lands between the worker's claim and its first step), then tried through the real socket and worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from assistant.access.authority import SentFrom
from assistant.conversation.services import chat_send, run_cancel, run_confirm, session_runs_end
from assistant.models import AgentMessage, AgentRun, AgentStep
from assistant.runs.lease import lease_claim, new_holder
from assistant.testing.sockets import connect, receive_until, signed_in_client
from assistant.turn.loop import run_turn
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Project

DELETE = "tracker_project_delete"
# The turn runs in this thread on the test's own transaction; the lease's heartbeat renews on a connection
# of its own that cannot see it, so a lease longer than the test keeps it from giving the run up.
LONG_LEASE = {"LEASE_SECONDS": 600}


def stopped_right_after_the_claim(user: Any) -> Callable[[int, str], AgentRun | None]:
    """A worker's claim, with the person's Stop landing the moment after it: the run is `running`, so the
    Stop can only ask the worker to stop."""

    def claim(run_id: int, holder: str) -> AgentRun | None:
        run = lease_claim(run_id, holder)
        run_cancel(user=user, run_id=run_id)
        return run

    return claim


def paused_on_delete(user: Any, project: Project, script: Callable[..., str]) -> tuple[AgentRun, AgentStep]:
    """A run asking the person to approve deleting `project`, as a worker leaves it."""
    model = script({"tool_calls": [{"name": DELETE, "arguments": {"pk": project.pk}}]}, {"text": "Deleted."})
    with assistant_settings_with(MODEL=model, **LONG_LEASE):
        run = chat_send(user=user, content=f"delete {project.name}").run
        assert run_turn(run.pk, holder=new_holder(), claim=lease_claim) == "awaiting_confirmation"
    return run, AgentStep.objects.get(run=run, state="awaiting_confirmation")


def timeline_of(run: AgentRun, user_factory: Callable[..., Any]) -> str:
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    response = staff.get(f"/admin/assistant/agentrun/{run.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


# --- the Stop is seen by the write that would start the next thing --------------------------------------


@pytest.mark.django_db
def test_a_stop_just_after_the_worker_took_an_approved_action_keeps_it_from_running(
    alice: Any, script: Callable[..., str], user_factory: Callable[..., Any]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    run, asked = paused_on_delete(alice, home, script)
    run_confirm(user=alice, run_id=run.pk, step_id=asked.pk, approve=True)

    with assistant_settings_with(**LONG_LEASE):
        assert run_turn(run.pk, holder=new_holder(), claim=stopped_right_after_the_claim(alice)) == "cancelled"

    assert Project.objects.filter(pk=home.pk).exists()
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.error) == ("cancelled", "cancelled", "Stopped by you.")
    asked.refresh_from_db()
    assert (asked.state, asked.confirmation, asked.took_effect) == ("finished", "approved", False)
    assert asked.result["status"] == "not_run"
    assert asked.reason == "You approved it, then stopped the run before it ran; the action was not taken."
    assert not AgentMessage.objects.filter(run=run, role="assistant").exists()
    body = timeline_of(run, user_factory)
    assert "Approved; running." not in body
    assert "You approved it, then stopped the run before it ran" in body


@pytest.mark.django_db
def test_a_stop_just_after_the_worker_took_a_run_ends_it_cancelled_with_nothing_done(
    alice: Any, script: Callable[..., str]
) -> None:
    model = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "after the stop"}}]},
                   {"text": "Recorded."})
    with assistant_settings_with(MODEL=model, **LONG_LEASE):
        run = chat_send(user=alice, content="record something").run
        assert run_turn(run.pk, holder=new_holder(), claim=stopped_right_after_the_claim(alice)) == "cancelled"

    assert not Effect.objects.exists()
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.reply) == ("cancelled", "cancelled", "")
    # The model's answer was recorded with the start of the call it asked for, in one write, which found the
    # Stop: the call's step says it was not run, and it never ran.
    model_call, call = run.steps.order_by("seq")
    assert model_call.kind == "model_call" and model_call.result["tool_calls"][0]["name"] == "test_record_effect"
    assert (call.tool_name, call.state, call.took_effect) == ("test_record_effect", "finished", False)
    assert call.result["status"] == "not_run"


@pytest.mark.django_db
def test_a_stop_before_the_answer_is_stored_wins_over_the_answer(alice: Any, script: Callable[..., str]) -> None:
    with assistant_settings_with(MODEL=script({"text": "Here is everything."}), **LONG_LEASE):
        run = chat_send(user=alice, content="tell me everything").run
        assert run_turn(run.pk, holder=new_holder(), claim=stopped_right_after_the_claim(alice)) == "cancelled"

    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.reply) == ("cancelled", "cancelled", "")
    assert not AgentMessage.objects.filter(run=run, role="assistant").exists()
    # The model's answer is kept in the record, as the step it was.
    assert run.steps.get().result["text"] == "Here is everything."


# --- a run that ends elsewhere closes its waiting step, in words that match what happened ---------------


@pytest.mark.django_db
def test_approving_then_stopping_before_a_worker_takes_it_leaves_an_approved_step_not_taken(
    alice: Any, script: Callable[..., str], user_factory: Callable[..., Any]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    run, asked = paused_on_delete(alice, home, script)
    run_confirm(user=alice, run_id=run.pk, step_id=asked.pk, approve=True)
    run_cancel(user=alice, run_id=run.pk)  # still queued: it ends here and then

    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")
    asked.refresh_from_db()
    assert (asked.state, asked.confirmation, asked.took_effect) == ("finished", "approved", False)
    assert asked.reason == "You approved it, then stopped the run before it ran; the action was not taken."
    assert Project.objects.filter(pk=home.pk).exists()
    body = timeline_of(run, user_factory)
    assert "Approved; running." not in body
    assert "approved by the person" in body and "stopped the run before it ran" in body


@pytest.mark.django_db
def test_a_question_ended_by_a_sign_out_is_unanswered_not_denied(
    alice: Any, script: Callable[..., str], user_factory: Callable[..., Any]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    session_key = signed_in_client(alice).cookies["sessionid"].value  # a real session: the run acts with it
    model = script({"tool_calls": [{"name": DELETE, "arguments": {"pk": home.pk}}]}, {"text": "Deleted."})
    with assistant_settings_with(MODEL=model, **LONG_LEASE):
        sent_from = SentFrom(session_key=session_key, client_address="127.0.0.1", origin="http://127.0.0.1:8000")
        run = chat_send(user=alice, content="delete Home", sent_from=sent_from).run
        assert run_turn(run.pk, holder=new_holder(), claim=lease_claim) == "awaiting_confirmation"

    session_runs_end(session_key=session_key)

    asked = run.steps.get(kind="tool_call")
    assert (asked.state, asked.confirmation, asked.took_effect) == ("finished", "", False)
    assert asked.reason == "You were signed out before answering; the action was not taken."
    body = timeline_of(run, user_factory)
    assert "denied by the person" not in body
    assert "asked, never answered" in body


# --- the same through the real socket and worker, as often as a test can afford ---------------------------


def assert_every_step_says_what_happened(run: AgentRun, project: Project) -> None:
    steps = list(run.steps.order_by("seq"))
    assert all(step.state == "finished" for step in steps), [(s.seq, s.state, s.reason) for s in steps]
    deletes = [step for step in steps if step.tool_name == DELETE]
    assert deletes and deletes[-1].confirmation == "approved"
    # The project is gone exactly when the record says the delete took effect.
    assert Project.objects.filter(pk=project.pk).exists() == (not any(step.took_effect for step in deletes))
    assert not any(step.reason == "Approved; running." for step in steps)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_stop_sent_with_the_approval_is_never_ignored(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    tries = 6
    projects = [Project.objects.create(owner=alice, name=f"Project {n}") for n in range(tries)]

    async def approve_and_stop(tab: Any, project: Project, pause: float) -> int:
        await tab.send_json_to({"type": "assistant.send", "content": f"delete {project.name}", "new_chat": True})
        asked = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm"))[-1]
        run_id = asked["run_id"]
        await tab.send_json_to({"type": "assistant.confirm", "run_id": run_id, "step_id": asked["step"]["id"],
                                "approve": True})
        if pause:
            await asyncio.sleep(pause)
        await tab.send_json_to({"type": "assistant.cancel", "run_id": run_id})
        await receive_until(tab, lambda event: event["type"] in ("assistant.cancelled", "assistant.replied",
                                                                 "assistant.reply_failed")
                            and event.get("run_id") == run_id)
        return int(run_id)

    tab = connect(alice)

    async def scenario() -> list[int]:
        assert (await tab.connect())[0]
        run_ids = []
        for number, project in enumerate(projects):
            model = script({"tool_calls": [{"name": DELETE, "arguments": {"pk": project.pk}}]}, {"text": "Deleted."})
            with assistant_settings_with(MODEL=model):
                run_ids.append(await approve_and_stop(tab, project, pause=0.002 * (number % 3)))
        await tab.disconnect()
        return run_ids

    run_ids = asyncio.run(scenario())
    for run_id, project in zip(run_ids, projects, strict=True):
        run = wait_for_run(run_id, *AgentRun.ENDED_STATUSES)
        # A Stop that found the run working is a request to the worker; the run then never "succeeds".
        assert not (run.status == "succeeded" and run.cancel_requested), run_id
        assert run.status == "cancelled" or not run.cancel_requested
        assert_every_step_says_what_happened(run, project)
