"""Replaying an eval set without side effects (issue 22, items 2–4): the candidate's model is called for real
(the scripted one here), every tool call is answered from the case's recording and never by running a view,
each case is graded against its expectations, and the command exits non-zero on a regression. Runs through
the real worker."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from assistant import selectors
from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalResult, EvalRun
from assistant.evals.replays import Candidate, eval_run_refresh, eval_run_start
from assistant.evals.report import eval_report
from assistant.models import AgentMemory, AgentRun
from assistant.services import chat_send
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

RECORD_MILK = {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "milk"}}]}


@pytest.fixture
def milk_set(alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> Any:
    """A set of one case: alice asked to record milk, and the run did, through the real worker."""
    with assistant_settings_with(MODEL=script(RECORD_MILK, {"text": "Recorded milk."})):
        asked = chat_send(user=alice, content="record milk").run
    run = wait_for_run(asked.pk, "succeeded")
    eval_set = set_named("milk", create=True)
    case_add(eval_set, run)
    return eval_set


def site_rows() -> dict[str, int]:
    """The rows of every table but the assistant's own record (runs, steps, chats) and the evals': the site's
    data, which a replay must leave as it was."""
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()
            if model._meta.app_label not in ("assistant", "assistant_evals")}


def finished(eval_run: EvalRun) -> EvalRun:
    return wait_for(lambda: eval_run_refresh(eval_run).status == EvalRun.Status.FINISHED and eval_run,
                    timeout=60, what=f"eval run {eval_run.pk} to finish")


def test_a_replay_that_calls_the_same_tools_passes_and_runs_no_view(
    alice: Any, milk_set: Any, script: Callable[..., str]
) -> None:
    before, memories = site_rows(), AgentMemory.objects.count()
    same = Candidate("same", model=script(RECORD_MILK, {"text": "Recorded milk again."}))

    eval_run = finished(eval_run_start(milk_set, [same]))

    result = eval_run.results.get()
    assert (result.status, result.passed, result.score) == (EvalResult.Status.GRADED, True, 1.0)
    replay = result.replay_run
    assert replay.channel == "eval" and replay.status == "succeeded"
    step = replay.steps.get(kind="tool_call")
    # Answered from the recording: the recorded outcome, and no effect recorded again.
    assert step.result["status"] == "done" and step.result["data"]["recorded"] == "milk"
    assert site_rows() == before and Effect.objects.count() == 1
    assert AgentMemory.objects.count() == memories  # nothing remembered of the person
    # The replay is staff's record: its person's chats and runs never show it.
    assert replay.chat_id not in [chat.pk for chat in selectors.chats_list(user=alice).chats]
    assert not AgentRun.objects.for_user(alice).filter(pk=replay.pk).exists()
    report = eval_report(eval_run)
    assert report["summary"]["same"]["pass_rate"] == 1.0 and report["regressions"] == []


def test_a_replay_that_calls_another_tool_or_other_arguments_fails_naming_the_deviation(
    alice: Any, milk_set: Any, script: Callable[..., str]
) -> None:
    before = site_rows()
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
    assert site_rows() == before and not Effect.objects.filter(label="eggs").exists()
    assert {row["change"] for row in eval_report(eval_run)["regressions"]} == {"regression"}


def test_a_replay_that_would_delete_deletes_nothing(alice: Any, milk_set: Any, script: Callable[..., str]) -> None:
    keep = Project.objects.create(owner=alice, name="Keep")
    before = site_rows()
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
    assert site_rows() == before


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
