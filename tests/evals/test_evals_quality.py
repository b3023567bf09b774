"""Quality in the profile (issue 22, item 5): a recorded run's quality is the person's thumbs when given;
otherwise, once an eval run has judged its recording against its case's rubric, that grade — and the profile's
average quality says how many entries each source gave.

The turns run in this process (`run_turn`, as a worker would), and the eval run is closed here by
`eval_run_refresh`, so the judge is this process's: JUDGE_MODEL is the fake OpenAI-protocol server's model.
Nothing is queued for a worker: `chat_send` and `eval_run_start` queue only on commit, which a plain
`django_db` test never reaches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from assistant.conversation.services import chat_send, run_feedback
from assistant.evals.cases import case_add, set_named
from assistant.evals.models import EvalCase, EvalRun, EvalSet
from assistant.evals.replays import Candidate, eval_run_refresh, eval_run_start
from assistant.evals.report import eval_report
from assistant.models import AgentRun
from assistant.runs.lease import lease_claim, new_holder
from assistant.testing.providers import FakeOpenAIServer, openai_completion
from assistant.turn.loop import run_turn
from registry.models import AgentProfile
from registry.selectors import profile_stats
from tests.conftest import assistant_settings_with
from tests.review.test_profile_admin import read

pytestmark = pytest.mark.django_db

RUBRIC = "The answer says which tasks are open."
JUDGE = "judge:fake-gpt"


@pytest.fixture
def judge() -> Iterator[FakeOpenAIServer]:
    """A model that can judge: the fake OpenAI-protocol server, as this process's JUDGE_MODEL (a provider of
    its own name, so no breaker another test left on "openai" gets in the way)."""
    with FakeOpenAIServer() as server, assistant_settings_with(
        JUDGE_MODEL=JUDGE,
        PROVIDERS={**settings.ASSISTANT["PROVIDERS"],
                   "judge": {"kind": "openai", "base_url": server.base_url, "api_key": "sk-test"}},
    ):
        yield server


def verdict(score: float) -> Any:
    return openai_completion(json.dumps({"score": score, "reason": "It names the open tasks."}))


def turn(run_id: int) -> AgentRun:
    """Work on the run here until it ends, as a worker would."""
    run_turn(run_id, holder=new_holder(), claim=lease_claim)
    run = AgentRun.objects.get(pk=run_id)
    assert run.status == "succeeded", (run.status, run.error)
    return run


def recorded(user: Any, script: Callable[..., str], reply: str) -> AgentRun:
    """A run of the person's that answered `reply`, filed in their profile as it ended."""
    with assistant_settings_with(MODEL=script({"text": reply})):
        return turn(chat_send(user=user, content="what are my open tasks?", new_chat=True).run.pk)


def judged_set(*runs: AgentRun, rubric: str | None = RUBRIC) -> EvalSet:
    """A set of the runs' cases, each with the rubric (staff's refinement of the case's expectations)."""
    eval_set = set_named("quality", create=True)
    for run in runs:
        case, _made = case_add(eval_set, run)
        if rubric is not None:
            EvalCase.objects.filter(pk=case.pk).update(expectations={**case.expectations, "rubric": rubric})
    return eval_set


def evaluated(eval_set: EvalSet, script: Callable[..., str]) -> EvalRun:
    """Replay the set against a candidate that answers, and see the eval run finish (which judges)."""
    eval_run = eval_run_start(eval_set, [Candidate("candidate", model=script({"text": "The replay's answer."}))])
    for replay_id in eval_run.results.values_list("replay_run_id", flat=True):
        turn(replay_id)
    eval_run = eval_run_refresh(eval_run)
    assert eval_run.status == EvalRun.Status.FINISHED
    return eval_run


def entry(run: AgentRun) -> dict[str, Any]:
    (found,) = [item for item in profile_of(run).window if item["run_id"] == run.pk]
    return found


def profile_of(run: AgentRun) -> AgentProfile:
    return AgentProfile.objects.get(owner_id=run.owner_id, spec_name=run.spec)


def judged_answers(server: FakeOpenAIServer) -> list[str]:
    """The answers the judge was asked to grade, in order."""
    return [json.loads(body["messages"][-1]["content"])["answer"] for body in server.bodies]


def test_thumbs_give_the_quality(alice: Any, script: Callable[..., str]) -> None:
    run = recorded(alice, script, "Buy milk is open.")
    assert "quality_score" not in entry(run)

    run_feedback(user=alice, run_id=run.pk, score=-1)

    assert (entry(run)["quality_score"], entry(run)["quality_source"]) == (0.0, "thumbs")
    stats = profile_stats(profile_of(run))
    assert (stats.avg_quality, stats.quality_thumbs, stats.quality_judged) == (0.0, 1, 0)


def test_a_judged_case_gives_the_quality_when_the_person_gave_no_thumbs(
    alice: Any, script: Callable[..., str], judge: FakeOpenAIServer
) -> None:
    run = recorded(alice, script, "Buy milk is open.")
    eval_set = judged_set(run)
    judge.queue(verdict(0.3), verdict(0.8))  # the replay's answer first, then the recording's

    eval_run = evaluated(eval_set, script)

    # The recording itself was judged, not the candidate's replay: its grade is the run's quality.
    assert judged_answers(judge) == ["The replay's answer.", "Buy milk is open."]
    assert {key: entry(run)[key] for key in ("quality_score", "quality_source", "judge_score", "judged_in")} == {
        "quality_score": 0.8, "quality_source": "judge", "judge_score": 0.8, "judged_in": eval_run.pk}
    assert AgentRun.objects.get(pk=run.pk).quality_score is None  # the run's own score is the person's alone

    # A second eval run judges again: the grade is replaced, the run still one entry, counted once.
    invocations = profile_of(run).invocations
    judge.queue(verdict(0.3), verdict(0.6))
    again = evaluated(eval_set, script)
    assert (entry(run)["quality_score"], entry(run)["judged_in"]) == (0.6, again.pk)
    profile = profile_of(run)
    assert profile.invocations == invocations and len(profile.window) == invocations
    stats = profile_stats(profile)
    assert (stats.avg_quality, stats.quality_thumbs, stats.quality_judged) == (0.6, 0, 1)


def test_thumbs_win_over_the_judge(alice: Any, script: Callable[..., str], judge: FakeOpenAIServer) -> None:
    rated = recorded(alice, script, "Rated: Buy milk is open.")
    later = recorded(alice, script, "Later rated: Buy milk is open.")
    run_feedback(user=alice, run_id=rated.pk, score=-1)
    eval_set = judged_set(rated, later)
    judge.queue(verdict(0.3), verdict(0.3), verdict(0.9))  # two replays, then the one recording left to judge

    evaluated(eval_set, script)

    # A run the person rated is not even put to the judge; its quality stays their thumbs.
    assert "Rated: Buy milk is open." not in judged_answers(judge)
    assert (entry(rated)["quality_score"], entry(rated)["quality_source"]) == (0.0, "thumbs")
    assert "judge_score" not in entry(rated)
    assert (entry(later)["quality_score"], entry(later)["quality_source"]) == (0.9, "judge")

    # Thumbs given after the judge win too, and taken back, the judge's grade is the quality again.
    run_feedback(user=alice, run_id=later.pk, score=1)
    assert (entry(later)["quality_score"], entry(later)["quality_source"]) == (1.0, "thumbs")
    run_feedback(user=alice, run_id=later.pk, score=0)
    assert (entry(later)["quality_score"], entry(later)["quality_source"]) == (0.9, "judge")


def test_the_average_quality_counts_each_source(
    alice: Any, user_factory: Any, script: Callable[..., str], judge: FakeOpenAIServer
) -> None:
    liked, disliked, judged = (recorded(alice, script, f"Answer {number}.") for number in range(3))
    unjudged = recorded(alice, script, "Not in any set.")
    run_feedback(user=alice, run_id=liked.pk, score=1)
    run_feedback(user=alice, run_id=disliked.pk, score=-1)
    judge.queue(verdict(0.2), verdict(0.8))
    evaluated(judged_set(judged), script)

    stats = profile_stats(profile_of(judged))
    # (1 + 0 + 0.8) / 3: the run nobody scored is not a zero.
    assert (round(stats.avg_quality, 4), stats.quality_thumbs, stats.quality_judged) == (0.6, 2, 1)
    assert "quality_score" not in entry(unjudged)

    staff = user_factory("reviewer", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_agentprofile"))
    reviewer = Client()
    reviewer.force_login(staff)
    page = read(reviewer, reverse("admin:registry_agentprofile_change", args=[profile_of(judged).pk]))
    assert page.figures["avg_quality"] == "0.60 (2 thumbs, 1 judged)"
    quality = {row[2]: row[6] for row in page.rows("window")}
    assert quality == {f"#{liked.pk}": "1 (thumbs up)", f"#{disliked.pk}": "0 (thumbs down)",
                       f"#{judged.pk}": "0.8 (judged)", f"#{unjudged.pk}": "—"}
    listing = read(reviewer, reverse("admin:registry_agentprofile_changelist"))
    assert listing.rows("result_list")[0][-1] == "0.60 (2 thumbs, 1 judged)"


def test_the_offline_model_cannot_judge_so_nothing_is_written(alice: Any, script: Callable[..., str]) -> None:
    run = recorded(alice, script, "Buy milk is open.")
    without_rubric = recorded(alice, script, "Nothing to grade it by.")
    eval_set = judged_set(run)
    case_add(eval_set, without_rubric)

    with assistant_settings_with(MODEL="offline", JUDGE_MODEL=None):
        eval_run = evaluated(eval_set, script)

    assert "quality_score" not in entry(run) and "judge_score" not in entry(run)
    assert "quality_score" not in entry(without_rubric)
    (judged_row,) = [row for row in eval_report(eval_run)["cases"] if row["recorded_run"] == run.pk]
    (grade,) = [grade for grade in judged_row["grades"] if grade["grader"] == "judge"]
    assert grade["passed"] is None and grade["detail"].startswith("not judged: the model 'offline' cannot judge")
    stats = profile_stats(profile_of(run))
    assert (stats.quality_thumbs, stats.quality_judged) == (0, 0)
