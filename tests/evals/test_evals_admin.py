"""Evals in the admin (issue 22, item 4): an eval run's page shows its progress while it runs and then its
report, each case linked to its recorded run and its replay's timeline; the set list's action starts an eval
run against a candidate, or says why it cannot; a replay's own page says it is one; staff only."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from assistant.conversation.services import chat_send
from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalCase, EvalResult, EvalRun, EvalSet
from assistant.evals.replays import Candidate, eval_run_start
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run

RECORD_MILK = {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "milk"}}]}
EVALS = "/admin/assistant_evals"


def run_url(run_id: int) -> str:
    return f"/admin/assistant/agentrun/{run_id}/change/"


def eval_run_url(eval_run_id: int) -> str:
    return f"{EVALS}/evalrun/{eval_run_id}/change/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def a_recorded_run(owner: Any, question: str) -> AgentRun:
    """A run as the worker leaves one: the person's question, one tool call that recorded milk, the reply."""
    chat = AgentChat.objects.create(owner=owner, title=question)
    run = AgentRun.objects.create(owner=owner, chat=chat, status=AgentRun.Status.SUCCEEDED, reply="Recorded milk.",
                                  tool_calls=1, model_calls=2, total_tokens=30, duration_ms=900)
    AgentMessage.objects.create(chat=chat, owner=owner, role="user", content=question, run=run)
    AgentStep.objects.create(run=run, seq=1, kind="model_call", prompt_tokens=10, completion_tokens=5)
    AgentStep.objects.create(run=run, seq=2, kind="tool_call", tool_name="test_record_effect",
                             arguments={"label": "milk"}, result={"status": "done", "data": {"recorded": "milk"}},
                             took_effect=True)
    return run


def replay_ends(replay: AgentRun, *, calls_the_tool: bool) -> None:
    """The replay ends as a worker ends it, but its grade is not sent (its worker died just after): the eval
    run's page must catch it."""
    if calls_the_tool:
        AgentStep.objects.create(run=replay, seq=1, kind="tool_call", tool_name="test_record_effect",
                                 arguments={"label": "milk"}, result={"status": "done"}, took_effect=True)
    AgentRun.objects.filter(pk=replay.pk).update(status=AgentRun.Status.SUCCEEDED, reply="Done.",
                                                 total_tokens=20, duration_ms=1200, finished_at=timezone.now())


@pytest.fixture
def two_cases(alice: Any) -> EvalSet:
    eval_set = set_named("groceries", create=True)
    for question in ("record milk", "record milk again"):
        case_add(eval_set, a_recorded_run(alice, question))
    return eval_set


@pytest.mark.django_db
def test_an_eval_runs_page_shows_its_progress_then_its_report_with_regressions_first(
    alice: Any, admin_user: Any, two_cases: EvalSet
) -> None:
    # In a test's transaction the replays are never handed to a worker: they wait, as on a busy site.
    eval_run = eval_run_start(two_cases, [Candidate("cheaper", model="offline")], by=admin_user)
    staff = signed_in(admin_user)

    page = staff.get(eval_run_url(eval_run.pk)).content.decode()
    assert "0 of 2 replays graded" in page and '<progress id="eval-progress-bar" value="0" max="2">' in page
    assert '<meta http-equiv="refresh" content="2">' in page  # it keeps up by itself while it runs
    assert "Stop reloading" in page
    assert '<meta http-equiv="refresh"' not in staff.get(eval_run_url(eval_run.pk) + "?refresh=off").content.decode()
    listed = staff.get(f"{EVALS}/evalrun/").content.decode()
    assert "0/2" in listed and "cheaper" in listed and "the recording" in listed

    first, second = (result.replay_run for result in eval_run.results.order_by("case_id"))
    replay_ends(first, calls_the_tool=True)
    assert "1 of 2 replays graded" in staff.get(eval_run_url(eval_run.pk)).content.decode()
    replay_ends(second, calls_the_tool=False)

    page = staff.get(eval_run_url(eval_run.pk)).content.decode()

    assert "2 of 2 replays graded" in page and "Finished" in page
    assert '<meta http-equiv="refresh"' not in page
    assert "2/2" in staff.get(f"{EVALS}/evalrun/").content.decode()
    # The candidate's figures against the baseline (the recording, which passes both cases).
    summary = re.search(r'<th scope="row">cheaper</th>(.*?)</tr>', page, flags=re.S)
    assert summary is not None
    assert re.findall(r'<td class="num">([^<]*)</td>', summary.group(1))[:2] == ["50%", "100%"]
    assert 'role="img"' in page and "cheaper now: 50%; cheaper baseline: 100%" in page  # the chart, in words
    # The regression is listed first, in words, with what deviated and links to both runs.
    regressions = page.split('id="regressions"')[1].split('id="other-cases"')[0]
    second_case = EvalCase.objects.get(source_run__messages__content="record milk again")
    assert f"case {second_case.pk}</a>" in regressions
    assert "▼ regression: passed in the baseline, fails now" in regressions
    assert "missing, in order: test_record_effect" in regressions
    assert f'href="{run_url(second_case.source_run_id)}"' in regressions
    assert f'href="{run_url(second.pk)}"' in regressions
    others = page.split('id="other-cases"')[1]
    assert f'href="{run_url(first.pk)}"' in others and "✓ pass" in others
    assert '<th scope="row">trajectory</th>' in page and '<th scope="row">default</th>' in page


@pytest.mark.django_db
def test_a_replays_own_page_says_it_is_one_and_links_its_eval_run_and_recorded_run(
    alice: Any, admin_user: Any, two_cases: EvalSet
) -> None:
    eval_run = eval_run_start(two_cases, [Candidate("cheaper", model="offline")])
    result = eval_run.results.order_by("case_id").first()
    assert result is not None and result.replay_run is not None
    staff = signed_in(admin_user)

    page = staff.get(run_url(result.replay_run.pk)).content.decode()

    assert (f"<strong>A replay</strong> of case {result.case_id} of eval set “groceries” ("
            f'<a href="{eval_run_url(eval_run.pk)}">eval run {eval_run.pk}</a>): its tool calls were answered from '
            "the recording; nothing ran.") in page
    assert f'The recorded run: <a href="{run_url(result.case.source_run_id)}">' in page
    assert "A replay" not in staff.get(run_url(result.case.source_run_id)).content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_sets_action_replays_it_against_a_candidate_and_shows_the_report(
    alice: Any, admin_user: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    with assistant_settings_with(MODEL=script(RECORD_MILK, {"text": "Recorded milk."})):
        asked = chat_send(user=alice, content="record milk").run
    recorded = wait_for_run(asked.pk, "succeeded")
    eval_set = set_named("milk", create=True)
    case_add(eval_set, recorded)
    staff = signed_in(admin_user)

    form = staff.post(f"{EVALS}/evalset/", {"action": "replay_against_candidate", "_selected_action": [eval_set.pk]})
    assert form.status_code == 200 and "Replay “milk” against a candidate" in form.content.decode()
    assert "each case&#x27;s own</option>" in form.content.decode()  # the spec, unless one is chosen

    started = staff.post(f"{EVALS}/evalset/", {
        "action": "replay_against_candidate", "_selected_action": [eval_set.pk], "apply": "1", "label": "same",
        "model": script(RECORD_MILK, {"text": "Recorded milk again."}), "instructions": "", "spec": "",
        "baseline": "recorded"})

    eval_run = EvalRun.objects.get()
    assert started.status_code == 302 and started["Location"] == eval_run_url(eval_run.pk)
    assert eval_run.created_by == admin_user and eval_run.candidates[0]["label"] == "same"
    page = wait_for(lambda: (body := staff.get(eval_run_url(eval_run.pk)).content.decode()) and
                    "1 of 1 replay graded" in body and body, timeout=60, what="the eval run's report")
    replay = EvalResult.objects.get().replay_run
    assert "Finished" in page and "0 regressions and 0 improvements" in page
    assert f'href="{run_url(recorded.pk)}"' in page and f'href="{run_url(replay.pk)}"' in page
    assert re.findall(r'<th scope="row">same</th>.*?<td class="num">([^<]*)</td>', page, flags=re.S)[0] == "100%"
    # A second eval run can take the first as its baseline.
    again = staff.post(f"{EVALS}/evalset/", {"action": "replay_against_candidate", "_selected_action": [eval_set.pk]})
    assert f'<option value="{eval_run.pk}">eval run {eval_run.pk} of ' in again.content.decode()


@pytest.mark.django_db
def test_a_start_that_is_refused_says_why_and_makes_nothing(alice: Any, admin_user: Any) -> None:
    empty = set_named("empty", create=True)
    staff = signed_in(admin_user)
    asked = {"action": "replay_against_candidate", "_selected_action": [empty.pk], "apply": "1", "label": "next",
             "model": "", "instructions": "", "spec": "", "baseline": "recorded"}

    refused = staff.post(f"{EVALS}/evalset/", asked)

    assert refused.status_code == 200 and "The set &#x27;empty&#x27; has no cases yet." in refused.content.decode()
    assert 'class="error"' in refused.content.decode()
    bad_model = staff.post(f"{EVALS}/evalset/", {**asked, "model": "nonsense"}).content.decode()
    assert "Unknown model &#x27;nonsense&#x27;" in bad_model
    bad_baseline = staff.post(f"{EVALS}/evalset/", {**asked, "baseline": "12345"}).content.decode()
    assert "Select a valid choice" in bad_baseline
    assert not EvalRun.objects.exists() and not AgentRun.objects.exists()


@pytest.mark.django_db
def test_eval_pages_are_staff_only_and_starting_needs_more_than_viewing(
    alice: Any, user_factory: Callable[..., Any], two_cases: EvalSet
) -> None:
    eval_run = eval_run_start(two_cases, [Candidate("cheaper", model="offline")])
    case = two_cases.cases.first()
    assert case is not None
    pages = [f"{EVALS}/evalset/", f"{EVALS}/evalset/{two_cases.pk}/change/", f"{EVALS}/evalcase/",
             f"{EVALS}/evalcase/{case.pk}/change/", f"{EVALS}/evalrun/", eval_run_url(eval_run.pk),
             f"{EVALS}/evalrun/{eval_run.pk}/history/"]
    start = {"action": "replay_against_candidate", "_selected_action": [two_cases.pk], "apply": "1",
             "label": "sneaky", "baseline": "recorded"}

    person = signed_in(alice)
    for path in pages:
        answer = person.get(path)
        assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/"), path
    assert person.post(f"{EVALS}/evalset/", start)["Location"].startswith("/admin/login/")

    staff_without = signed_in(user_factory("clerk", is_staff=True))
    for path in pages:
        assert staff_without.get(path).status_code == 403, path
    assert staff_without.post(f"{EVALS}/evalset/", start).status_code == 403

    viewer = user_factory("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(content_type__app_label="assistant_evals",
                                                          codename__startswith="view_"))
    viewing = signed_in(viewer)
    for path in pages:
        assert viewing.get(path).status_code == 200, path
    assert "replay_against_candidate" not in viewing.get(f"{EVALS}/evalset/").content.decode()
    viewing.post(f"{EVALS}/evalset/", start)
    assert EvalRun.objects.count() == 1  # only the one made above

    viewer.user_permissions.add(Permission.objects.get(content_type__app_label="assistant_evals",
                                                       codename="add_evalrun"))
    starter = signed_in(viewer)
    assert "replay_against_candidate" in starter.get(f"{EVALS}/evalset/").content.decode()
    assert starter.post(f"{EVALS}/evalset/", start).status_code == 302
    assert EvalRun.objects.count() == 2
