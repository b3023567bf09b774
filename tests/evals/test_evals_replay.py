"""Replaying an eval set without side effects (issue 22, items 2–4): the candidate's model is called for real
(the scripted one here), every tool call is answered from the case's recording and never by running a view,
each case is graded against its expectations, and the command exits non-zero on a regression. Runs through
the real worker.

That a replay changed nothing is shown by every row of every table it could reach, compared whole before and
after (`site_data`): a count would not see a row updated (tests/evals/test_evals_replay_writes.py replays updates)."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Q

from assistant.conversation.services import chat_send, run_confirm
from assistant.evals.cases import case_add, set_named
from assistant.evals.channel import EVAL
from assistant.evals.models import EvalResult, EvalRun
from assistant.evals.replay import NO_RECORDED_ANSWER
from assistant.evals.replays import Candidate, eval_run_refresh, eval_run_start
from assistant.evals.report import eval_report
from assistant.live import selectors
from assistant.models import AgentChat, AgentMemory, AgentMessage, AgentPlan, AgentRun, AgentStep
from assistant.runs.lease import lease_claim, new_holder
from assistant.runs.lifecycle import run_config, run_open
from assistant.turn.loop import run_turn
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tests.tables import every_model_but, table_rows
from tests.testapp.models import Effect
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

RECORD_MILK = {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "milk"}}]}


def recorded_run(user: Any, question: str, model: str, **send: Any) -> AgentRun:
    """`question` asked and answered through the real worker by `model`, once the run has ended and its
    exchange is in the person's memory (written just after the end): a recording whose every write is done."""
    with assistant_settings_with(MODEL=model):
        asked = chat_send(user=user, content=question, **send).run
    run = wait_for_run(asked.pk, "succeeded")
    wait_for(lambda: AgentMemory.objects.filter(owner=user, content__startswith=f"User asked: {question}\n").exists(),
             what=f"the memory of run {run.pk}")
    return run


@pytest.fixture
def milk_set(alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> Any:
    """A set of one case: alice asked to record milk, and the run did, through the real worker."""
    run = recorded_run(alice, "record milk", script(RECORD_MILK, {"text": "Recorded milk."}))
    eval_set = set_named("milk", create=True)
    case_add(eval_set, run)
    return eval_set


#: A replay's own record, which it writes and may: its runs (a member's too), their steps and plans, its chat
#: and messages, all of channel `eval`. The evals' own tables are left out as a whole.
REPLAY_RECORD = {
    AgentChat: Q(channel=EVAL.value), AgentMessage: Q(chat__channel=EVAL.value),
    AgentRun: Q(channel=EVAL.value), AgentStep: Q(run__channel=EVAL.value), AgentPlan: Q(run__channel=EVAL.value),
}


def site_data() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table but a replay's own record: the tracker's and the test app's, the people,
    their sessions, memories and profiles, their chats and recorded runs. A replay leaves all of it as it was."""
    return table_rows(every_model_but("assistant_evals"), leaving_out=REPLAY_RECORD)


def finished(eval_run: EvalRun) -> EvalRun:
    return wait_for(lambda: eval_run_refresh(eval_run).status == EvalRun.Status.FINISHED and eval_run,
                    timeout=60, what=f"eval run {eval_run.pk} to finish")


def test_a_replay_that_calls_the_same_tools_passes_and_runs_no_view(
    alice: Any, milk_set: Any, script: Callable[..., str]
) -> None:
    before = site_data()
    same = Candidate("same", model=script(RECORD_MILK, {"text": "Recorded milk again."}))

    eval_run = finished(eval_run_start(milk_set, [same]))

    result = eval_run.results.get()
    assert (result.status, result.passed, result.score) == (EvalResult.Status.GRADED, True, 1.0)
    replay = result.replay_run
    assert replay.channel == "eval" and replay.status == "succeeded"
    step = replay.steps.get(kind="tool_call")
    # Answered from the recording: the recorded outcome, and no effect recorded again.
    assert step.result["status"] == "done" and step.result["data"]["recorded"] == "milk"
    assert site_data() == before and Effect.objects.count() == 1  # nor anything remembered of alice
    # The replay is staff's record: its person's chats and runs never show it.
    assert replay.chat_id not in [chat.pk for chat in selectors.chats_list(user=alice).chats]
    assert not AgentRun.objects.for_user(alice).filter(pk=replay.pk).exists()
    report = eval_report(eval_run)
    assert report["summary"]["same"]["pass_rate"] == 1.0 and report["regressions"] == []


def test_a_replay_that_calls_another_tool_or_other_arguments_fails_naming_the_deviation(
    alice: Any, milk_set: Any, script: Callable[..., str]
) -> None:
    before = site_data()
    eggs = Candidate("eggs", model=script({"tool_calls": [{"name": "test_record_effect",
                                                            "arguments": {"label": "eggs"}}]}, {"text": "Recorded."}))
    nothing = Candidate("nothing", model=script({"text": "I recorded nothing."}))

    eval_run = finished(eval_run_start(milk_set, [eggs, nothing]))

    results = {result.candidate: result for result in eval_run.results.all()}
    assert results["eggs"].passed is False and results["nothing"].passed is False
    eggs_deviations = [item for grade in results["eggs"].grades for item in grade["deviations"]]
    assert any("no recorded answer for test_record_effect" in item and '"eggs"' in item for item in eggs_deviations)
    nothing_deviations = [item for grade in results["nothing"].grades for item in grade["deviations"]]
    assert any("missing, in order: test_record_effect" in item for item in nothing_deviations)
    assert results["eggs"].replay_run.steps.get(kind="tool_call").result["status"] == "no_recorded_answer"
    assert site_data() == before and not Effect.objects.filter(label="eggs").exists()
    assert {row["change"] for row in eval_report(eval_run)["regressions"]} == {"regression"}


def test_a_replay_that_would_delete_deletes_nothing(alice: Any, milk_set: Any, script: Callable[..., str]) -> None:
    keep = Project.objects.create(owner=alice, name="Keep")
    before = site_data()
    deleter = Candidate("deleter", model=script(
        {"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": keep.pk}}]},
        {"tool_calls": [{"name": "tracker_task_delete", "arguments": {"pk": 1}}]},
        {"text": "Deleted everything."}))

    eval_run = finished(eval_run_start(milk_set, [deleter]))

    result = eval_run.results.get()
    assert result.passed is False
    statuses = [step.result["status"] for step in result.replay_run.steps.filter(kind="tool_call")]
    assert statuses == ["no_recorded_answer", "no_recorded_answer"]  # never asked, never run
    assert Project.objects.filter(pk=keep.pk).exists()
    assert site_data() == before


def test_the_command_prints_the_report_and_exits_non_zero_on_a_regression(
    milk_set: Any, script: Callable[..., str]
) -> None:
    out = StringIO()
    call_command("assistant_eval", "run", "milk", "--model", script(RECORD_MILK, {"text": "Recorded."}),
                 stdout=out, stderr=StringIO())
    assert "pass" in out.getvalue() and "1/1 passed" in out.getvalue()

    with pytest.raises(CommandError, match="1 case passed in the baseline and failed now"):
        call_command("assistant_eval", "run", "milk", "--model", script({"text": "No."}), stdout=StringIO(),
                     stderr=StringIO())
    with pytest.raises(CommandError, match="baseline"):
        call_command("assistant_eval", "run", "milk", "--baseline", "nonsense", stdout=StringIO())


def test_a_run_approved_with_changes_replays_what_was_approved_and_tells_the_model_what_changed(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    misspelt = {"tool_calls": [{"name": "test_task_change", "arguments": {"pk": task.pk, "title": "Buy mlk"}}]}
    with assistant_settings_with(MODEL=script(misspelt, {"text": "Renamed."})):
        asked = chat_send(user=alice, content="rename the tap task").run
    waiting = wait_for_run(asked.pk, "awaiting_confirmation")
    step = waiting.steps.get(state="awaiting_confirmation")
    run_confirm(user=alice, run_id=waiting.pk, step_id=step.pk, approve=True,
                arguments={"pk": task.pk, "title": "Buy milk"})
    recorded = wait_for_run(asked.pk, "succeeded")
    wait_for(lambda: AgentMemory.objects.filter(owner=alice).exists(), what="the recorded run's memory")
    eval_set = set_named("edited", create=True)
    case_add(eval_set, recorded)
    before = site_data()

    # The candidate's model asks for the misspelt title again, as the recording's model did.
    eval_run = finished(eval_run_start(eval_set, [Candidate("same", model=script(misspelt, {"text": "Renamed."}))]))

    result = eval_run.results.get()
    assert (result.status, result.passed) == (EvalResult.Status.GRADED, True), result.grades
    replayed = result.replay_run.steps.get(kind="tool_call")
    assert (replayed.arguments, replayed.asked_arguments) == (
        {"pk": task.pk, "title": "Buy milk"}, {"pk": task.pk, "title": "Buy mlk"})
    assert (replayed.result["took_effect"], replayed.result["changed_by_person"]) == (
        True, {"title": {"asked": "Buy mlk", "approved": "Buy milk"}})
    assert site_data() == before and Task.objects.get(pk=task.pk).title == "Buy milk"  # as the recording left it


def test_a_replay_taken_up_again_answers_the_call_it_was_cut_short_in_from_its_recording(
    alice: Any, script: Callable[..., str]
) -> None:
    """A replay runs no view, so a call its worker died inside is answered again from the recording when the run
    is taken up again, rather than left with an unknown outcome (which would hide what the model asked for)."""
    chat = AgentChat.objects.create(owner=alice, spec="default", channel=EVAL.value)
    recorded = {"steps": [{"seq": 2, "kind": "tool_call", "tool": "test_record_effect", "arguments": {"label": "milk"},
                           "result": {"status": "done", "took_effect": True, "data": {"recorded": "milk"}}}]}
    config = {**run_config(spec="default"), "replay": {"recordings": [recorded]},
              "model": script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "cheese"}}]},
                              {"text": "Recorded cheese."})}
    run = run_open(spec="default", config=config, channel=EVAL.value, owner=alice, chat=chat)
    run.save()
    AgentMessage.objects.create(chat=chat, owner=alice, role="user", content="record milk", run=run)
    # As a worker that died left it: the model asked for cheese, and the call's step had started.
    AgentStep.objects.create(run=run, seq=1, kind="model_call", state="finished", result={
        "text": "", "tool_calls": [{"id": "call_1_1", "name": "test_record_effect", "arguments": {"label": "cheese"}}]})
    AgentStep.objects.create(run=run, seq=2, kind="tool_call", state="started", tool_name="test_record_effect",
                             call_id="call_1_1", arguments={"label": "cheese"})
    AgentRun.objects.filter(pk=run.pk).update(attempts=1)

    run_turn(run.pk, holder=new_holder(), claim=lease_claim, enqueue=lambda run_id: None)

    run.refresh_from_db()
    cut_short = run.steps.get(seq=2)
    assert (run.status, cut_short.result["status"], cut_short.took_effect) == ("succeeded", NO_RECORDED_ANSWER, False)
    assert run.steps.filter(kind="tool_call").count() == 1 and not Effect.objects.exists()
