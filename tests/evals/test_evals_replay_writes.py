"""Replays of recorded runs that changed rows (issue 32, item 9): "Replays never touch the site's data: an eval
answers tool calls from the recording." Each run is recorded for real through the worker; then the rows it
changed are set to a state its write would visibly change again, and the replay — the same calls, answered
from the recording — must leave every row of the site exactly as it was then (`site_data`, compared whole).
A replay that ran the views again would rename, complete, archive or delete for a second time.

The other ways a replay could reach the site's data are held here too: a read answered from the recording
(never read again, so it cannot drift or have an effect), a call its person approved (answered as approved,
nobody asked, nothing run), the page it was asked from (told as recorded, never read again), and the
person's memory (nothing recalled, nothing remembered) and profile (in `site_data`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from assistant.conversation.services import chat_send, run_confirm
from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalCase, EvalResult
from assistant.evals.replays import Candidate, eval_run_start
from assistant.models import AgentMemory, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.turn.context import NOTES_START, PAGE_START
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tests.evals.test_evals_replay import finished, recorded_run, site_data
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def calls(*named: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments} for name, arguments in named]}


def tool_steps(run: AgentRun) -> list[AgentStep]:
    return list(run.steps.filter(kind=AgentStep.Kind.TOOL_CALL).order_by("seq"))


def recorded_results(case: EvalCase) -> list[dict[str, Any]]:
    return [step["result"] for step in case.recording["steps"] if step["kind"] == "tool_call"]


def replayed(case: EvalCase, candidate: Candidate) -> tuple[EvalResult, AgentRun]:
    """The case replayed against `candidate` to its grade: (its result, its replay's run)."""
    result = finished(eval_run_start(case.eval_set, [candidate])).results.get()
    replay = result.replay_run
    assert replay is not None and replay.status == "succeeded", replay and replay.error
    return result, replay


def told(body: dict[str, Any], start: str) -> list[str]:
    """The messages of a request to the model that open with `start` (the page's or the earlier notes')."""
    return [message["content"] for message in body["messages"] if str(message.get("content") or "").startswith(start)]


def case_of(run: AgentRun, name: str) -> EvalCase:
    case, _made = case_add(set_named(name, create=True), run)
    return case


def test_a_replay_of_a_rename_and_a_task_marked_done_renames_and_completes_nothing_again(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home", description="Chores")
    milk = Task.objects.create(project=home, title="Buy milk", created_by=alice)
    asked: list[tuple[str, dict[str, Any]]] = [("tracker_project_update", {"pk": home.pk, "name": "House"}),
                                               ("tracker_task_complete", {"pk": milk.pk})]
    run = recorded_run(alice, "rename Home to House and mark Buy milk done",
                       script(calls(*asked), {"text": "Renamed it and marked Buy milk done."}))
    home.refresh_from_db()
    milk.refresh_from_db()
    assert (home.name, milk.status) == ("House", "done") and milk.completed_at is not None  # done for real
    case = case_of(run, "updates")
    # Back to what it was before the recording: a replay that renamed or completed again would show.
    Project.objects.filter(pk=home.pk).update(name="Home")
    Task.objects.filter(pk=milk.pk).update(status="todo", completed_at=None)
    before = site_data()

    result, replay = replayed(case, Candidate("same", model=script(calls(*asked), {"text": "Done again."})))

    assert (result.passed, result.score) == (True, 1.0), result.grades
    steps = tool_steps(replay)
    assert [(step.tool_name, step.arguments) for step in steps] == [(name, arguments) for name, arguments in asked]
    assert [step.result for step in steps] == recorded_results(case)  # the recording's outcomes, word for word
    home.refresh_from_db()
    milk.refresh_from_db()
    assert (home.name, milk.status, milk.completed_at) == ("Home", "todo", None)
    assert site_data() == before


def test_a_replay_of_an_archive_asked_from_a_page_archives_nothing_and_is_told_the_page_as_recorded(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    garden = Project.objects.create(owner=alice, name="Garden")
    # The offline demo model, as the site runs it, reads "this" from the page it is given.
    run = recorded_run(alice, "archive this", "offline", page=f"/tracker/projects/{garden.pk}/")
    garden.refresh_from_db()
    assert garden.archived, run.reply
    case = case_of(run, "archives")
    [archive] = [step for step in case.recording["steps"] if step["kind"] == "tool_call"]
    assert (archive["tool"], archive["arguments"]) == ("tracker_project_archive", {"pk": garden.pk, "archived": True})
    # Brought back, and renamed: the page would read otherwise now, and an archive would show.
    Project.objects.filter(pk=garden.pk).update(archived=False, name="Renamed since")
    before = site_data()
    fake_openai.queue(openai_stream([], [("c1", "tracker_project_archive", archive["arguments"])]),
                      openai_stream(["Archived Garden."]))

    result, replay = replayed(case, Candidate("same", model="openai:fake-gpt"))

    assert result.passed, result.grades
    [step] = tool_steps(replay)
    assert step.result == archive["result"] and step.result["took_effect"] is True  # as recorded, not run
    garden.refresh_from_db()
    assert (garden.archived, garden.name) == (False, "Renamed since")
    assert site_data() == before
    # The model was told the page as the recording saw it, not as it reads now.
    [page] = [json.loads(text.split("\n")[2]) for text in told(fake_openai.bodies[0], PAGE_START)]
    assert (page["id"], page["fields"]["name"], page["fields"]["archived"]) == (garden.pk, "Garden", False)


def test_a_replay_of_a_delete_its_person_approved_deletes_nothing_and_asks_nobody(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    milk = Task.objects.create(project=home, title="Buy milk", created_by=alice)
    delete = calls(("tracker_task_delete", {"pk": milk.pk}))
    with assistant_settings_with(MODEL=script(delete, {"text": "Deleted Buy milk."})):
        asked = chat_send(user=alice, content="delete Buy milk").run
    waiting = wait_for_run(asked.pk, "awaiting_confirmation")
    run_confirm(user=alice, run_id=waiting.pk, step_id=tool_steps(waiting)[0].pk, approve=True)
    run = wait_for_run(asked.pk, "succeeded")
    wait_for(lambda: AgentMemory.objects.filter(owner=alice, content__startswith="User asked: delete").exists(),
             what="the recording's memory")
    assert not Task.objects.filter(pk=milk.pk).exists()  # deleted for real, once approved
    case = case_of(run, "approved")
    assert case.recording["steps"][1]["confirmation"] == "approved"
    # The very row again, under its number: a replay that deleted again would take it.
    Task.objects.create(pk=milk.pk, project=home, title="Buy milk", created_by=alice)
    before = site_data()

    result, replay = replayed(case, Candidate("same", model=script(delete, {"text": "Deleted it again."})))

    assert result.passed, result.grades
    [step] = tool_steps(replay)
    assert step.result == recorded_results(case)[0] and step.result["took_effect"] is True
    # Answered as its person answered: the replay never waited for anyone.
    assert not replay.steps.filter(state="awaiting_confirmation").exists()
    assert Task.objects.filter(pk=milk.pk, title="Buy milk").exists()
    assert site_data() == before


def test_a_replay_of_a_read_is_answered_as_it_read_then_not_read_again(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Buy milk", created_by=alice)
    search = calls(("tracker_task_list", {"search": "milk"}))
    run = recorded_run(alice, "which tasks are about milk?", script(search, {"text": "Buy milk."}))
    case = case_of(run, "reads")
    [recorded] = recorded_results(case)
    assert [task["title"] for task in recorded["data"]["results"]] == ["Buy milk"]
    # What a read would find now: a replay that read again would answer with it.
    Task.objects.create(project=home, title="Buy oat milk", created_by=alice)
    before = site_data()

    result, replay = replayed(case, Candidate("same", model=script(search, {"text": "Buy milk."})))

    assert result.passed, result.grades
    [step] = tool_steps(replay)
    assert step.result == recorded
    assert site_data() == before


def test_a_replay_recalls_nothing_of_the_persons_memory_and_remembers_nothing(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str], fake_openai: FakeOpenAIServer
) -> None:
    run = recorded_run(alice, "record milk", script(calls(("test_record_effect", {"label": "milk"})),
                                                    {"text": "Recorded milk."}))
    case = case_of(run, "memory")
    assert AgentMemory.objects.filter(owner=alice, content__contains="Recorded milk.").exists()
    profile = AgentProfile.objects.get(owner=alice, spec_name=run.spec)
    before = site_data()
    fake_openai.queue(openai_stream([], [("c1", "test_record_effect", {"label": "milk"})]),
                      openai_stream(["Recorded milk."]))

    result, replay = replayed(case, Candidate("same", model="openai:fake-gpt"))

    assert result.passed, result.grades
    # What memory holds now is not what the recording was answered with.
    assert len(fake_openai.bodies) == 2
    assert not [text for body in fake_openai.bodies for text in told(body, NOTES_START)]
    assert site_data() == before  # nothing remembered, nothing filed in alice's profile
    assert AgentProfile.objects.get(pk=profile.pk).invocations == profile.invocations

    # The same question asked for real is reminded of it: what the replay was not told was there to tell.
    fake_openai.reset()
    fake_openai.queue(openai_stream(["You asked me to record milk before."]))
    with assistant_settings_with(MODEL="openai:fake-gpt"):
        live = chat_send(user=alice, content="record milk", new_chat=True).run
    wait_for_run(live.pk, "succeeded")
    [body] = fake_openai.bodies
    notes = told(body, NOTES_START)
    assert notes and "Recorded milk." in notes[0]
