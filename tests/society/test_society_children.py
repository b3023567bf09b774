"""A child run as the run that asks a member starts it: the same person, chat and live session, the member's
own settings, and limits reserved from what its parent has left, so no tree spends more than its top run."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from assistant.access.authority import SentFrom
from assistant.conversation.services import Refused, chat_send, run_cancel, session_runs_end
from assistant.infra.worker_queue import run_enqueue
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs.lifecycle import DelegationRefused, run_child_start, run_config, run_path
from assistant.society.budget import reserve, tree_usage
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import signed_in_client
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project, Task

pytestmark = pytest.mark.django_db

SPECS = {
    "default": {"tools": ["tracker_task_list"], "permission_profile": "standard", "role": "Routes.",
                "delegates": ["reader", "clerk"], "limits": {"max_model_calls": 8, "max_tool_calls": 10}},
    "reader": {"tools": ["tracker_task_list"], "permission_profile": "restricted", "role": "Reads.",
               "model": "scripted:/tmp/reader.json", "limits": {"max_model_calls": 3}, "delegates": ["clerk"]},
    "clerk": {"tools": ["tracker_task_create"], "permission_profile": "standard", "role": "Adds tasks.",
              "delegates": ["reader"]},
}


@pytest.fixture
def society() -> Any:
    with assistant_settings_with(SPECS=SPECS, SPEC="default", MAX_TOKENS_PER_RUN=1_000) as overridden:
        yield overridden


def top_run(user: Any, *, model_calls: int = 0, tokens_each: int = 0, sent_from: SentFrom | None = None) -> AgentRun:
    run = chat_send(user=user, content="do several things", sent_from=sent_from).run
    AgentRun.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now(),
                                              clock_started_at=timezone.now())
    run.refresh_from_db()
    for seq in range(1, model_calls + 1):
        AgentStep.objects.create(run=run, seq=seq, kind="model_call", prompt_tokens=tokens_each)
    return run


def used_model_calls(run: AgentRun, count: int, start: int = 1) -> None:
    for seq in range(start, start + count):
        AgentStep.objects.create(run=run, seq=seq, kind="model_call", prompt_tokens=10, completion_tokens=5)


def test_a_child_acts_as_the_same_person_with_the_same_session_under_its_members_settings(
    alice: Any, society: Any
) -> None:
    key = signed_in_client(alice).cookies["sessionid"].value
    sent_from = SentFrom(session_key=key, client_address="127.0.0.1", origin="http://127.0.0.1:8000")
    parent = top_run(alice, sent_from=sent_from)
    child = run_child_start(parent=parent, spec="reader", task="List my open tasks.")

    assert (child.owner_id, child.chat_id, child.parent_id, child.root_id, child.depth) == (
        alice.pk, parent.chat_id, parent.pk, parent.pk, 1)
    assert (child.status, child.spec, child.task) == ("queued", "reader", "List my open tasks.")
    assert SentFrom.of_run(child) == SentFrom.of_run(parent)  # the live session, opened from its own row
    assert (child.config["model"], child.config["permission_profile"]) == ("scripted:/tmp/reader.json", "restricted")
    assert run_path(child) == ["default", "reader"]
    # The session's end ends the whole tree: the child too, found by the same session.
    session_runs_end(session_key=key)
    child.refresh_from_db()
    assert (child.status, child.stop_reason) == ("cancelled", "session_ended")


def test_a_childs_limits_are_what_its_parent_has_left_within_its_members_own(alice: Any, society: Any) -> None:
    parent = top_run(alice, model_calls=2, tokens_each=100)  # of 8 calls and 1,000 tokens: 6 and 800 left
    clerk = run_child_start(parent=parent, spec="clerk", task="Add a task.")
    assert (clerk.config["max_model_calls"], clerk.config["max_tokens_per_run"]) == (6, 800)
    # While the clerk works it holds all of that: nothing is left for another member.
    with pytest.raises(DelegationRefused, match="model calls"):
        run_child_start(parent=parent, spec="reader", task="Read.")
    # Once it ended, having used one call and 15 tokens, the rest is there again, within the reader's own 3.
    used_model_calls(clerk, 1)
    AgentRun.objects.filter(pk=clerk.pk).update(status="succeeded")
    reader = run_child_start(parent=parent, spec="reader", task="Read.")
    assert (reader.config["max_model_calls"], reader.config["max_tokens_per_run"]) == (3, 785)


def test_delegations_of_one_answer_share_what_is_left_and_never_overshoot_it(alice: Any, society: Any) -> None:
    parent = top_run(alice, model_calls=2, tokens_each=100)  # 6 calls and 800 tokens left
    children = [run_child_start(parent=parent, spec=spec, task="Part of it.", sharing=sharing)
                for spec, sharing in (("clerk", 3), ("reader", 2), ("clerk", 1))]
    assert [child.config["max_model_calls"] for child in children] == [2, 2, 2]
    assert sum(child.config["max_tokens_per_run"] for child in children) <= 800
    with pytest.raises(DelegationRefused):
        run_child_start(parent=parent, spec="reader", task="One more.")


def test_an_ended_child_counts_what_it_and_its_own_children_used(alice: Any, society: Any) -> None:
    parent = top_run(alice, model_calls=1)
    child = run_child_start(parent=parent, spec="reader", task="Read.")
    used_model_calls(child, 2)
    grandchild = run_child_start(parent=child, spec="clerk", task="Add.")
    used_model_calls(grandchild, 1)
    AgentRun.objects.filter(pk__in=[child.pk, grandchild.pk]).update(status="succeeded")
    assert tree_usage(child).model_calls == 3 and tree_usage(parent).model_calls == 4
    # 8 − 1 own − 3 used below: 4 left for the next member.
    assert reserve(parent, {"max_model_calls": 8, "max_tool_calls": 20, "max_tokens_per_run": 50_000,
                            "max_wall_seconds": 120})["max_model_calls"] == 4


def test_nothing_left_is_a_refusal_and_no_child(alice: Any, society: Any) -> None:
    parent = top_run(alice, model_calls=8)
    with pytest.raises(DelegationRefused, match="model calls"):
        run_child_start(parent=parent, spec="clerk", task="Add a task.")
    assert not AgentRun.objects.filter(parent=parent).exists()


def test_a_child_has_only_the_time_its_parent_has_left(alice: Any, society: Any) -> None:
    parent = top_run(alice)
    AgentRun.objects.filter(pk=parent.pk).update(clock_started_at=timezone.now() - timedelta(seconds=100))
    parent.refresh_from_db()
    child = run_child_start(parent=parent, spec="clerk", task="Add a task.")
    assert 0 < child.config["max_wall_seconds"] <= 20


def test_too_deep_or_a_member_already_on_the_path_is_refused(alice: Any, society: Any) -> None:
    parent = top_run(alice)
    reader = run_child_start(parent=parent, spec="reader", task="Read.")
    clerk = run_child_start(parent=reader, spec="clerk", task="Add.")
    with pytest.raises(DelegationRefused, match="already working on this request"):
        run_child_start(parent=clerk, spec="reader", task="Read again.")
    with assistant_settings_with(SPECS=SPECS, MAX_DELEGATION_DEPTH=2), \
            pytest.raises(DelegationRefused, match="deep"):
        run_child_start(parent=clerk, spec="default", task="Route.")


def test_stopping_the_top_run_stops_its_whole_tree(alice: Any, society: Any) -> None:
    parent = top_run(alice)
    reader = run_child_start(parent=parent, spec="reader", task="Read.")
    AgentRun.objects.filter(pk=reader.pk).update(status="running", lease_owner="a-worker")
    waiting = run_child_start(parent=reader, spec="clerk", task="Add.")
    AgentRun.objects.filter(pk=waiting.pk).update(status="awaiting_confirmation")
    asked = AgentStep.objects.create(run=waiting, seq=1, kind="tool_call", tool_name="tracker_task_create",
                                     call_id="c1", state="awaiting_confirmation", arguments={"title": "x"})

    run_cancel(user=alice, run_id=parent.pk)

    # Working runs are asked to stop at their next step; a waiting one ends now, its question not taken.
    for row in (parent, reader, waiting, asked):
        row.refresh_from_db()
    assert (parent.status, parent.cancel_requested) == ("running", True)
    assert (reader.status, reader.cancel_requested) == ("running", True)
    assert (waiting.status, waiting.stop_reason) == ("cancelled", "cancelled")
    assert (asked.state, asked.result["status"]) == ("finished", "not_run")


def test_a_new_message_supersedes_a_tree_waiting_for_the_person_and_is_refused_while_a_member_works(
    alice: Any, society: Any
) -> None:
    parent = top_run(alice)
    AgentRun.objects.filter(pk=parent.pk).update(status="awaiting_members", lease_owner="")
    clerk = run_child_start(parent=parent, spec="clerk", task="Add.")
    AgentRun.objects.filter(pk=clerk.pk).update(status="running", lease_owner="a-worker")

    # A member still works: the request is not waiting for the person, so the message is refused.
    with pytest.raises(Refused) as refused:
        chat_send(user=alice, content="something else", chat_id=parent.chat_id)
    assert refused.value.code == "run_active"

    AgentRun.objects.filter(pk=clerk.pk).update(status="awaiting_confirmation", lease_owner="")
    asked = AgentStep.objects.create(run=clerk, seq=1, kind="tool_call", tool_name="tracker_task_create",
                                     call_id="c1", state="awaiting_confirmation", arguments={"title": "x"})
    sent = chat_send(user=alice, content="something else", chat_id=parent.chat_id)

    for row in (parent, clerk, asked):
        row.refresh_from_db()
    assert (parent.status, parent.stop_reason, clerk.status, clerk.stop_reason) == (
        "cancelled", "superseded", "cancelled", "superseded")
    assert (asked.state, asked.result["status"], asked.confirmation) == ("finished", "not_run", "")
    assert sent.run.status == "queued" and sent.run.parent_id is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_members_run_works_on_its_task_alone_as_the_person_and_never_beyond_its_profile(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Water plants")
    Task.objects.create(project=Project.objects.create(owner=bob, name="Bob's"), title="Bob's chore")
    key = signed_in_client(alice).cookies["sessionid"].value
    sent_from = SentFrom(session_key=key, client_address="127.0.0.1", origin="http://127.0.0.1:8000")
    chat = AgentChat.objects.create(owner=alice)
    # A top run someone else's worker holds, in a chat that says things the member must not see.
    parent = AgentRun.objects.create(owner=alice, chat=chat, status="running", lease_owner="elsewhere",
                                     config=run_config(), started_at=timezone.now(), **sent_from.stored())
    AgentMessage.objects.create(chat=chat, owner=alice, role="user", content="my secret plan", run=parent)
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Sneaky"})]),
        openai_stream([], [("c2", "tracker_task_list", {})]),
        openai_stream(["You have one open task: Water plants."]),
    )
    # The test-reader spec (tests/settings.py) is restricted: reads only, whatever its asker may do.
    with assistant_settings_with(MODEL="openai:fake-gpt"), transaction.atomic():
        child = run_child_start(parent=parent, spec="test-reader", task="List my open tasks.")
        run_enqueue(child.pk)

    child = wait_for_run(child.pk, "succeeded", "failed", "cancelled", "timed_out")
    assert (child.status, child.reply) == ("succeeded", "You have one open task: Water plants.")
    # It answered the run that asked it, not the chat: no message of its own.
    assert not AgentMessage.objects.filter(run=child).exists()
    denied, listed = child.steps.filter(kind="tool_call").order_by("seq")
    assert (denied.tool_name, denied.result["status"], denied.took_effect) == ("tracker_task_create", "denied", False)
    assert not Task.objects.filter(title="Sneaky").exists()
    assert [row["title"] for row in listed.result["data"]["results"]] == ["Water plants"]
    # Its model was told its task, and nothing of the chat.
    first_call = json.dumps(fake_openai.bodies[0]["messages"])
    assert "List my open tasks." in first_call and "my secret plan" not in first_call
    # Filed once, in its own spec's profile, saying who asked it.
    [entry] = AgentProfile.objects.get(owner=alice, spec_name="test-reader").window
    assert (entry["run_id"], entry["asked_by"], entry["status"]) == (child.pk, "default", "success")
