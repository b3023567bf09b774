"""The worker is SIGKILLed (with its pool) while a member the run asked is in the middle of a tool call."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Q

from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from registry.models import AgentProfile
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply
from tests.testapp.models import Effect

pytestmark = pytest.mark.django_db(transaction=True)


def killed_inside_the_slow_tool(stack: Stack, top_id: int, *, what: str) -> AgentRun:
    """SIGKILL the worker (and its pool) once a run of the tree (the top run or one below it) is inside
    `test_slow_effect`, start a new one, and return the top run once it has ended."""
    wait_for(lambda: AgentStep.objects.filter(Q(run_id=top_id) | Q(run__root_id=top_id), tool_name="test_slow_effect",
                                              state="started").exists(), timeout=20, what=what)
    stack.worker.kill()
    stack.worker.start()
    return stack.wait_for_run(top_id, timeout=40)


def test_a_worker_killed_inside_a_member_finishes_the_tree_with_every_effect_once(alice: Any, stack: Stack) -> None:
    stack.script_for(
        "fault-asker",
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "asker"}}]},
        {"tool_calls": [{"name": "ask_fault-member", "arguments": {"task": "Record three things."}}]},
        {"text": "The member finished."},
    )
    stack.script_for(
        "fault-member",
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "member-before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "member-during", "seconds": 5}}]},
        {"text": "Recorded what I could."},
    )
    AgentChat.objects.create(owner=alice, spec="fault-asker")
    page = stack.socket(alice)
    top_id = page.send_message("ask the member")["run_id"]
    top = killed_inside_the_slow_tool(stack, top_id, what="the member's slow tool to start")

    assert_one_reply(top, "The member finished.")
    [member] = AgentRun.objects.filter(root_id=top_id)
    assert (member.status, member.reply, member.attempts) == ("succeeded", "Recorded what I could.", 2)
    # Every effect once: the completed ones were not redone, the one cut short died with its transaction.
    assert [Effect.objects.filter(label=label).count() for label in ("asker", "member-before", "member-during")] == [
        1, 1, 0]
    interrupted = member.steps.get(tool_name="test_slow_effect")
    assert (interrupted.result["status"], interrupted.took_effect) == ("unknown", None)
    # The asker heard the member's answer, with its uncertain step among what it did.
    asked = top.steps.get(tool_name="ask_fault-member")
    assert (asked.result["status"], asked.result["child_run_id"]) == ("escalated", member.pk)
    assert asked.took_effect is True
    # Each run filed once, in its own spec's profile.
    windows = {profile.spec_name: [entry["run_id"] for entry in profile.window]
               for profile in AgentProfile.objects.filter(owner=alice)}
    assert windows == {"fault-asker": [top.pk], "fault-member": [member.pk]}
    stack.assert_all_alive()
    page.close()


def test_a_worker_killed_inside_a_handed_over_member_resumes_it_and_its_answer_is_the_reply_once(
    alice: Any, stack: Stack
) -> None:
    """The member asked alone answers the person itself (a handoff): killed mid-run, it is taken up again with
    nothing done twice, and its answer is still the one reply, with no further call of the asker's model (its
    script has none to give)."""
    stack.script_for(
        "fault-asker",
        {"tool_calls": [{"name": "ask_fault-member", "arguments": {"task": "Record three things."}}]},
    )
    stack.script_for(
        "fault-member",
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "member-before"}}]},
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "member-during", "seconds": 5}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "member-after"}}]},
        {"text": "Recorded the first and the last; the middle one is unknown."},
    )
    AgentChat.objects.create(owner=alice, spec="fault-asker")
    page = stack.socket(alice)
    top_id = page.send_message("hand it over")["run_id"]
    top = killed_inside_the_slow_tool(stack, top_id, what="the member's slow tool to start")

    answer = "Recorded the first and the last; the middle one is unknown."
    assert_one_reply(top, answer)
    [member] = AgentRun.objects.filter(root_id=top_id)
    assert (member.status, member.attempts, top.answered_by_id) == ("succeeded", 2, member.pk)
    assert AgentMessage.objects.get(run=top, role="assistant").member == "fault-member"
    assert top.steps.filter(kind=AgentStep.Kind.MODEL_CALL).count() == 1
    assert [Effect.objects.filter(label=label).count() for label in ("member-before", "member-during", "member-after")
            ] == [1, 0, 1]
    windows = {profile.spec_name: [(entry["run_id"], entry.get("handoff")) for entry in profile.window]
               for profile in AgentProfile.objects.filter(owner=alice)}
    assert windows == {"fault-asker": [(top.pk, None)], "fault-member": [(member.pk, "person")]}
    stack.assert_all_alive()
    page.close()


def test_a_worker_killed_two_members_deep_in_a_handoff_resumes_and_the_deepest_answer_is_the_reply(
    alice: Any, stack: Stack
) -> None:
    """lead → asker → member, each handing over: the worker dies inside the member, two levels down; the tree
    resumes, every effect once, and the member's answer is the one reply, naming it, with neither the lead's
    nor the asker's model asked again."""
    stack.script_for("fault-lead", {"tool_calls": [{"name": "ask_fault-asker", "arguments": {"task": "Go."}}]})
    stack.script_for("fault-asker", {"tool_calls": [{"name": "ask_fault-member", "arguments": {"task": "Go on."}}]})
    stack.script_for(
        "fault-member",
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "deep-during", "seconds": 5}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "deep-after"}}]},
        {"text": "Done two levels down."},
    )
    AgentChat.objects.create(owner=alice, spec="fault-lead")
    page = stack.socket(alice)
    top_id = page.send_message("pass it down")["run_id"]
    top = killed_inside_the_slow_tool(stack, top_id, what="the deepest member's slow tool to start")

    assert_one_reply(top, "Done two levels down.")
    asker = AgentRun.objects.get(parent_id=top_id)
    member = AgentRun.objects.get(parent=asker)
    assert (top.answered_by_id, asker.answered_by_id, member.status) == (member.pk, member.pk, "succeeded")
    assert AgentMessage.objects.get(run=top, role="assistant").member == "fault-member"
    assert [run.steps.filter(kind=AgentStep.Kind.MODEL_CALL).count() for run in (top, asker)] == [1, 1]
    assert [Effect.objects.filter(label=label).count() for label in ("deep-during", "deep-after")] == [0, 1]
    windows = {profile.spec_name: [entry["run_id"] for entry in profile.window]
               for profile in AgentProfile.objects.filter(owner=alice)}
    assert windows == {"fault-lead": [top.pk], "fault-asker": [asker.pk], "fault-member": [member.pk]}
    stack.assert_all_alive()
    page.close()


def test_a_worker_killed_inside_a_routed_run_resumes_it_as_the_members_run_with_its_effect_unknown_and_one_notice(
    alice: Any, stack: Stack
) -> None:
    """A plain request made the run its member's (routing): killed inside the member's slow tool, the run is taken
    up again as the member's (not routed a second time), the cut-short effect is not redone, and the router's model
    is never asked (its script has nothing to give)."""
    stack.script_for(
        "fault-slow",
        {"tool_calls": [{"name": "test_slow_effect", "arguments": {"label": "routed-during", "seconds": 5}}]},
        {"text": "I could not tell whether it was recorded."},
    )
    AgentChat.objects.create(owner=alice, spec="fault-router")
    page = stack.socket(alice)
    run_id = page.send_message("record an effect slowly")["run_id"]
    run = killed_inside_the_slow_tool(stack, run_id, what="the routed run's slow tool to start")

    assert_one_reply(run, "I could not tell whether it was recorded.")
    assert (run.spec, run.routed_from, run.attempts, run.parent_id) == ("fault-slow", "fault-router", 2, None)
    assert not AgentRun.objects.filter(root_id=run_id).exists()
    steps = list(run.steps.order_by("seq"))
    assert [(step.kind, step.tool_name) for step in steps] == [
        ("notice", ""), ("model_call", ""), ("tool_call", "test_slow_effect"), ("model_call", "")]
    assert steps[0].reason.startswith("routed to fault-slow: intent test_slow_effect")
    assert (steps[2].result["status"], steps[2].took_effect) == ("unknown", None)
    assert Effect.objects.filter(label="routed-during").count() == 0
    windows = {profile.spec_name: [entry["run_id"] for entry in profile.window]
               for profile in AgentProfile.objects.filter(owner=alice)}
    assert windows == {"fault-slow": [run.pk]}
    stack.assert_all_alive()
    page.close()
