"""A delegated run replays as its tree (issue 22, item 2): the member the replay asks is a child replay run
answered from the recording of that member's run, so the member's tool calls run no view either; a member
that calls other arguments gets no recorded answer. Recorded and replayed through the real worker.

A case is graded on its tree's calls: each member's right after the step that asked it, so a member's
deviation fails its case, named with the member.

The society is the test settings' own (tests/settings.py): `test-asker` may ask `test-clerk`, which creates
tasks. Every spec's model is the fake provider, which answers the calls in the order they are made: the
asker, then the member it works on at once, then the asker again.
"""

from __future__ import annotations

from typing import Any

import pytest

from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalCase, EvalResult
from assistant.evals.replay import NO_RECORDED_ANSWER
from assistant.evals.replays import Candidate, eval_run_start
from assistant.models import AgentChat, AgentRun
from assistant.testing.providers.openai_server import FakeOpenAIServer, Reply, openai_stream
from tests.conftest import WorkerProcess
from tests.evals.test_evals_replay import finished, recorded_run, site_data
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def tree_replies(project: int, *, asked: str, created: str) -> list[Reply]:
    """The asker hands "add `asked`" to the clerk, and the clerk creates the task `created`."""
    return [
        openai_stream([], [("a1", "ask_test-clerk", {"task": f"Add the task '{asked}' to Home.",
                                                      "context": f"Home is project {project}."})]),
        openai_stream([], [("c1", "tracker_task_create", {"project": project, "title": created})]),
        openai_stream([f"Added {created}."]),
        openai_stream([f"The clerk added {created} to Home."]),
    ]


@pytest.fixture
def tree_case(alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer) -> EvalCase:
    """A case of a delegated run: alice asked the asker, whose clerk created "Buy milk" for real."""
    home = Project.objects.create(owner=alice, name="Home")
    fake_openai.queue(*tree_replies(home.pk, asked="Buy milk", created="Buy milk"))
    chat = AgentChat.objects.create(owner=alice, spec="test-asker")
    run = recorded_run(alice, "add Buy milk to Home", "openai:fake-gpt", chat_id=chat.pk)
    assert Task.objects.filter(project=home, title="Buy milk").count() == 1  # the recording did it for real
    case, _made = case_add(set_named("tree", create=True), run)
    return case


def member_of(replay: AgentRun) -> AgentRun:
    [member] = AgentRun.objects.filter(root=replay)
    return member


def test_a_delegated_run_replays_as_its_tree_and_its_member_runs_no_view(
    tree_case: EvalCase, fake_openai: FakeOpenAIServer
) -> None:
    [asking] = [step for step in tree_case.recording["steps"] if step.get("member_run")]
    recorded_member = asking["member_run"]
    [recorded_create] = [step for step in recorded_member["steps"] if step["kind"] == "tool_call"]
    home = Project.objects.get(name="Home")
    before, tasks = site_data(), Task.objects.count()
    fake_openai.queue(*tree_replies(home.pk, asked="Buy milk", created="Buy milk"))

    eval_run = finished(eval_run_start(tree_case.eval_set, [Candidate("same")]))

    result = eval_run.results.get()
    assert (result.status, result.passed, result.score) == (EvalResult.Status.GRADED, True, 1.0)
    replay = result.replay_run
    member = member_of(replay)
    # The member is a replay too: a child of the replay, of the eval channel, answered from its own recording.
    assert (member.spec, member.parent_id, member.channel, member.status) == (
        "test-clerk", replay.pk, "eval", "succeeded")
    assert member.config["replay"]["recordings"] == [recorded_member]
    create = member.steps.get(kind="tool_call")
    assert (create.tool_name, create.arguments) == ("tracker_task_create", {"project": home.pk, "title": "Buy milk"})
    assert create.result == recorded_create["result"]  # the task the recording made, not a new one
    assert site_data() == before and Task.objects.count() == tasks
    # The asker heard the member's answer as in the recording.
    assert replay.steps.get(kind="tool_call").result["status"] == asking["result"]["status"]


def member_deviates(tree_case: EvalCase, fake_openai: FakeOpenAIServer) -> EvalResult:
    """Replay the case with the asker asking exactly as recorded and only the member deviating: it creates
    "Buy eggs" where the recording created "Buy milk"."""
    home = Project.objects.get(name="Home")
    fake_openai.queue(*tree_replies(home.pk, asked="Buy milk", created="Buy eggs"))
    return finished(eval_run_start(tree_case.eval_set, [Candidate("eggs")])).results.get()


def test_a_member_that_calls_other_arguments_gets_no_recorded_answer_and_creates_nothing(
    tree_case: EvalCase, fake_openai: FakeOpenAIServer
) -> None:
    before = site_data()

    result = member_deviates(tree_case, fake_openai)

    create = member_of(result.replay_run).steps.get(kind="tool_call")
    assert (create.result["status"], create.result["took_effect"]) == (NO_RECORDED_ANSWER, False)
    assert site_data() == before and not Task.objects.filter(title="Buy eggs").exists()
    assert result.status == EvalResult.Status.GRADED


def test_a_member_that_calls_other_arguments_fails_its_case_naming_the_deviation(
    tree_case: EvalCase, fake_openai: FakeOpenAIServer
) -> None:
    result = member_deviates(tree_case, fake_openai)

    deviations = [item for grade in result.grades for item in grade["deviations"]]
    assert result.passed is False
    assert any("no recorded answer for tracker_task_create" in item and "Buy eggs" in item for item in deviations)


def test_a_routed_run_replays_the_same_way_with_no_call_of_the_askers_model(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    """`test-router` routes a plain request to the clerk with no model call: its run becomes the clerk's. The case
    keeps the spec the person asked, so the replay routes it again, and the clerk replays from its recording."""
    home = Project.objects.create(owner=alice, name="Home")
    clerk_replies = [openai_stream([], [("c1", "tracker_task_create", {"project": home.pk, "title": "Buy milk"})]),
                     openai_stream(["Added Buy milk."])]
    fake_openai.queue(*clerk_replies)
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    run = recorded_run(alice, "Add the task 'Buy milk' to the project 'Home'", "openai:fake-gpt", chat_id=chat.pk)
    assert (run.reply, run.spec, run.routed_from, run.model_calls) == (
        "Added Buy milk.", "test-clerk", "test-router", 2)
    case, _made = case_add(set_named("routed", create=True), run)
    assert case.spec == "test-router"
    before, asked = site_data(), len(fake_openai.bodies)
    fake_openai.queue(*clerk_replies)

    eval_run = finished(eval_run_start(case.eval_set, [Candidate("same")]))

    result = eval_run.results.get()
    assert (result.status, result.passed) == (EvalResult.Status.GRADED, True)
    replay = result.replay_run
    assert (replay.reply, replay.spec, replay.routed_from, replay.channel) == (
        "Added Buy milk.", "test-clerk", "test-router", "eval")
    assert replay.steps.order_by("seq")[0].reason.startswith("routed to test-clerk")
    assert replay.steps.get(kind="tool_call").result["took_effect"] is True  # as recorded: nothing was run
    assert len(fake_openai.bodies) - asked == 2  # the clerk's two calls: none of the router's
    assert site_data() == before
