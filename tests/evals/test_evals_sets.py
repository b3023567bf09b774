"""Eval sets from real runs (issue 22, item 1): a case keeps what its run was asked, the conversation before
it, its spec and person, every step with its arguments and result, and the reply; it expects the recorded
trajectory by default; sets are evidence (read-only in the admin unless EVALS_EDITABLE) and round-trip
through JSON; staff only."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from assistant.conversation.services import chat_send, run_feedback
from assistant.evals.cases import BadExport, CaseRefused, case_add, proposed_runs, set_export, set_import, set_named
from assistant.evals.models import EvalCase, EvalSet
from assistant.models import AgentChat, AgentRun
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorded(alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]) -> AgentRun:
    """A two-turn chat run through the real worker: the second turn calls a tool and answers."""
    first = script({"text": "Hello! What shall I record?"})
    with assistant_settings_with(MODEL=first):
        opening = chat_send(user=alice, content="hi").run
    wait_for_run(opening.pk, "succeeded")
    second = script({"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "milk"}}]},
                    {"text": "Recorded milk."})
    with assistant_settings_with(MODEL=second):
        run = chat_send(user=alice, content="record milk", chat_id=opening.chat_id).run
    return wait_for_run(run.pk, "succeeded")


@pytest.mark.worker
def test_a_case_keeps_what_its_run_was_asked_and_did_and_expects_the_same_trajectory(
    alice: Any, recorded: AgentRun
) -> None:
    eval_set = set_named("smoke", create=True)

    case, made = case_add(eval_set, recorded)
    again, made_again = case_add(eval_set, recorded)

    assert made and not made_again and again.pk == case.pk  # a run is one case of a set
    assert (case.question, case.spec, case.owner, case.owner_username) == ("record milk", recorded.spec, alice,
                                                                           "alice")
    assert case.conversation == [{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": "Hello! What shall I record?"}]
    steps = case.recording["steps"]
    assert [step["kind"] for step in steps] == ["model_call", "tool_call", "model_call"]
    assert steps[1]["tool"] == "test_record_effect" and steps[1]["arguments"] == {"label": "milk"}
    assert steps[1]["result"]["status"] == "done" and steps[1]["took_effect"] is True
    assert case.recording["reply"] == "Recorded milk." and case.recording["tool_calls"] == 1
    recorded_call = {"tool": "test_record_effect", "arguments": {"label": "milk"}}
    assert case.expectations["trajectory"] == {"mode": "in_order", "calls": [recorded_call]}
    assert case.expectations["reply"] == {"nonempty": True}


@pytest.mark.worker
def test_thumbs_down_and_failed_runs_are_proposed(alice: Any, recorded: AgentRun) -> None:
    assert recorded not in proposed_runs()
    run_feedback(user=alice, run_id=recorded.pk, score=-1)
    assert list(proposed_runs()) == [recorded]

    out = StringIO()
    call_command("assistant_eval", "propose", stdout=out)
    assert f"{recorded.pk}\tthumbs_down" in out.getvalue()


def test_failed_runs_are_proposed_but_for_a_channel_whose_policy_proposes_none(alice: Any) -> None:
    # The MCP channel's policy proposes none of its runs: an agent's call holds no question of the person's to
    # replay. Nor does the evals' own: a replay that fails is a case's result, not a new case. A value no installed
    # app registers is looked up as the panel's.
    failed = {}
    for channel in ("panel", "eval", "mcp", "gone"):
        chat = AgentChat.objects.create(owner=alice, channel=channel)
        failed[channel] = AgentRun.objects.create(owner=alice, chat=chat, channel=channel,
                                                  status=AgentRun.Status.FAILED)
    assert set(proposed_runs()) == {failed["panel"], failed["gone"]}


@pytest.mark.worker
def test_the_command_adds_runs_and_the_set_round_trips_through_json(recorded: AgentRun, tmp_path: Path) -> None:
    out = StringIO()
    call_command("assistant_eval", "add", "regressions", str(recorded.pk), stdout=out)
    assert f"Added run {recorded.pk} as case" in out.getvalue()
    path = tmp_path / "regressions.json"
    call_command("assistant_eval", "export", "regressions", "--out", str(path))
    exported = json.loads(path.read_text())

    EvalSet.objects.all().delete()
    call_command("assistant_eval", "import", str(path), stdout=StringIO())

    imported = set_named("regressions")
    assert set_export(imported) == exported  # the same set, case for case
    # Importing again adds nothing: a case is known by its run's number.
    _, added = set_import(exported)
    assert added == 0 and imported.cases.count() == 1


def test_bad_input_gets_a_clear_error_and_stores_nothing(alice: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="No run 999999"):
        call_command("assistant_eval", "add", "things", "999999")
    with pytest.raises(CaseRefused, match="letters, digits"):
        set_named("not a name!", create=True)
    with pytest.raises(BadExport, match="format"):
        set_import({"name": "x", "cases": []})
    with pytest.raises(BadExport, match="case 1: recording"):
        set_import({"format": "assistant-eval-set/1", "name": "x", "cases": [{"spec": "default", "question": "q"}]})
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("assistant_eval", "import", str(broken))
    assert not EvalSet.objects.exists() and not EvalCase.objects.exists()


def test_an_active_run_or_a_members_run_is_not_a_case(alice: Any) -> None:
    active = chat_send(user=alice, content="still working").run
    with pytest.raises(CaseRefused, match="still"):
        case_add(set_named("s", create=True), active)


def _case(alice: Any) -> EvalCase:
    eval_set = set_named("reviewed", create=True)
    return EvalCase.objects.create(eval_set=eval_set, owner=alice, owner_username="alice", spec="default",
                                   question="record milk", recording={"steps": [], "reply": "ok"},
                                   expectations={"reply": {"nonempty": True}})


def test_sets_are_evidence_in_the_admin_and_staff_only(alice: Any, admin_user: Any) -> None:
    case = _case(alice)
    staff = Client()
    staff.force_login(admin_user)
    page = staff.get(f"/admin/assistant_evals/evalcase/{case.pk}/change/")
    assert page.status_code == 200 and "record milk" in page.content.decode()
    assert 'name="expectations"' not in page.content.decode()  # read-only
    assert staff.post(f"/admin/assistant_evals/evalcase/{case.pk}/delete/", {"post": "yes"}).status_code == 403
    with assistant_settings_with(EVALS_EDITABLE=True):
        editable = staff.get(f"/admin/assistant_evals/evalcase/{case.pk}/change/").content.decode()
        assert 'name="expectations"' in editable
    person = Client()
    person.force_login(alice)
    for path in ("/admin/assistant_evals/evalset/", f"/admin/assistant_evals/evalcase/{case.pk}/change/"):
        assert person.get(path).status_code == 302  # to the admin's login: no admin for an ordinary person


@pytest.mark.worker
def test_the_run_lists_action_adds_selected_runs_to_a_set(recorded: AgentRun, admin_user: Any) -> None:
    staff = Client()
    staff.force_login(admin_user)
    asked = staff.post("/admin/assistant/agentrun/", {"action": "add_to_eval_set",
                                                      "_selected_action": [recorded.pk]})
    assert asked.status_code == 200 and "Add runs to an eval set" in asked.content.decode()

    done = staff.post("/admin/assistant/agentrun/", {"action": "add_to_eval_set", "_selected_action": [recorded.pk],
                                                     "apply": "1", "eval_set": "from-admin"}, follow=True)

    assert "Added 1 case to the eval set “from-admin”" in done.content.decode()
    assert set_named("from-admin").cases.get().source_run == recorded
