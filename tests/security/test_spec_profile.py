"""A spec's permission profile is what its runs get: the global PERMISSION_PROFILE is only the default
for a spec that declares none, and never widens one that does (issue 9, item 3).

`test-reader` is declared in tests/settings.py (restricted, every tool), so the worker knows it too.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command

from assistant.conversation.services import chat_send
from assistant.models import AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.testapp.models import Effect
from tracker.models import Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _tool_steps(run_id: int) -> list[AgentStep]:
    return list(AgentStep.objects.filter(run_id=run_id, kind=AgentStep.Kind.TOOL_CALL).order_by("seq"))


def test_a_restricted_spec_cannot_write_though_the_global_profile_trusts(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "written"}}]},
        {"tool_calls": [{"name": "tracker_project_update", "arguments": {"pk": home.pk, "name": "Renamed"}}]},
        {"tool_calls": [{"name": "tracker_task_list", "arguments": {}}]},
        {"text": "Tried."},
    )

    with assistant_settings_with(MODEL=model, SPEC="test-reader", PERMISSION_PROFILE="trusted"):
        run = chat_send(user=alice, content="write something").run
    wait_for_run(run.pk, "succeeded")

    steps = _tool_steps(run.pk)
    assert [(step.tool_name, step.result["status"]) for step in steps] == [
        ("test_record_effect", "denied"), ("tracker_project_update", "denied"), ("tracker_task_list", "data"),
    ]
    assert all("read tools only" in step.result["reason"] for step in steps[:2])
    assert not Effect.objects.exists()
    assert Project.objects.get(pk=home.pk).name == "Home"
    # What the run kept is what it was held to: the spec's profile, not the global one.
    assert (run.config["spec"], run.config["permission_profile"]) == ("test-reader", "restricted")


def _command(**options: Any) -> list[dict[str, Any]]:
    out = io.StringIO()
    call_command("assistant_tools", json=True, stdout=out, **options)
    listed: list[dict[str, Any]] = json.loads(out.getvalue())
    return listed


def test_the_command_lists_exactly_what_a_run_under_the_spec_is_offered(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    with assistant_settings_with(MODEL="openai:fake-gpt", SPEC="test-reader", PERMISSION_PROFILE="trusted"):
        listed = _command(user="alice", spec="test-reader")
        run = chat_send(user=alice, content="hello").run
        wait_for_run(run.pk, "succeeded")

        [request] = fake_openai.bodies
        offered = {tool["function"]["name"] for tool in request["tools"]}
        assert {tool["name"] for tool in listed} == offered
        assert all(tool["kind"] in ("read", "plan") for tool in listed)
        # An explicit --profile may narrow a spec's profile, never widen it.
        assert _command(user="alice", spec="test-reader", profile="trusted") == listed

        text = io.StringIO()
        call_command("assistant_tools", user="alice", spec="test-reader", profile="trusted", stdout=text)
        assert text.getvalue().splitlines()[0] == (
            f"{len(listed)} tool(s) offered to alice by spec test-reader, profile restricted "
            "(--profile trusted cannot widen the spec's restricted):"
        )


def test_a_spec_without_a_profile_gets_the_global_one(alice: Any) -> None:
    with assistant_settings_with(SPECS={"helper": {"tools": "__all__"}}, PERMISSION_PROFILE="restricted"):
        assert all(tool["kind"] in ("read", "plan") for tool in _command(user="alice", spec="helper"))
    with assistant_settings_with(SPECS={"helper": {"tools": "__all__"}}, PERMISSION_PROFILE="standard"):
        assert any(tool["kind"] == "write" for tool in _command(user="alice", spec="helper"))


def test_a_misspelt_profile_or_tool_in_the_settings_is_named_by_the_system_checks() -> None:
    from django.core.checks import run_checks

    specs = {"helper": {"tools": ["tracker_task_list", "tracker_task_lst"], "permission_profile": "restricted "}}
    with assistant_settings_with(SPECS=specs, PERMISSION_PROFILE="standrad"):
        found = sorted((message.id, message.msg) for message in run_checks()
                       if message.id in {"assistant.E015", "assistant.W014"})

    assert found == [
        ("assistant.E015", "PERMISSION_PROFILE names the permission profile 'standrad', which does not exist."),
        ("assistant.E015", "SPECS['helper'] names the permission profile 'restricted ', which does not exist."),
        ("assistant.W014", "SPECS['helper'] lists tool(s) that are not declared: tracker_task_lst."),
    ]
