"""What a spec's model is offered to hand work over: one tool per member it may ask, ranked by the registry
for this person, never a member already on the run's path, never past the depth limit."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.core.checks import run_checks

from assistant.society import delegation_tools
from registry.services import profile_record_invocation
from tests.conftest import assistant_settings_with

pytestmark = pytest.mark.django_db

SOCIETY = {
    "default": {"tools": ["tracker_task_list"], "permission_profile": "standard", "role": "Routes requests.",
                "delegates": ["reader", "clerk"]},
    "reader": {"tools": ["tracker_task_list"], "permission_profile": "restricted", "role": "Reads tasks.",
               "delegates": ["clerk"]},
    "clerk": {"tools": ["tracker_task_create"], "permission_profile": "standard", "role": "Adds tasks.",
              "delegates": ["reader"]},
}
_run_ids = itertools.count(1)


def ran(owner: Any, spec_name: str, outcomes: str) -> None:
    for letter in outcomes:
        profile_record_invocation(owner=owner, spec_name=spec_name, entry={
            "run_id": next(_run_ids), "status": "success" if letter == "s" else "error", "duration_ms": 900,
            "tool_calls": 0, "tool_errors": 0, "token_usage": 100, "intent": "conversation", "tools_used": [],
            "failed_tools": [], "error_summary": None if letter == "s" else "It failed.",
        })


def offered(owner: Any, asking: str, **where: Any) -> list[str]:
    with assistant_settings_with(SPECS=SOCIETY):
        return [tool.name for tool in delegation_tools(owner=owner, asking=asking, **where)]


def test_members_are_offered_best_record_first_each_saying_what_it_is_for(alice: Any) -> None:
    # Unproven, both keep their declared order; once the clerk has the better record, it comes first.
    assert offered(alice, "default") == ["ask_reader", "ask_clerk"]
    ran(alice, "reader", "sfffs")
    ran(alice, "clerk", "sssss")
    with assistant_settings_with(SPECS=SOCIETY):
        clerk, reader = delegation_tools(owner=alice, asking="default")
    assert (clerk.name, reader.name) == ("ask_clerk", "ask_reader")
    assert "Adds tasks" in clerk.description and "100% success rate over 5 recent runs" in clerk.description
    assert "Reads tasks" in reader.description and "40% success rate" in reader.description
    assert clerk.parameters["required"] == ["task"] and clerk.parameters["additionalProperties"] is False
    assert (clerk.member, clerk.confirm, clerk.kind) == ("clerk", False, "delegate")


def test_a_member_with_no_record_says_so(alice: Any) -> None:
    with assistant_settings_with(SPECS=SOCIETY):
        (clerk,) = delegation_tools(owner=alice, asking="reader")
    assert clerk.annotation.startswith("no record yet") and "no record yet" in clerk.description


def test_no_spec_twice_on_one_path(alice: Any) -> None:
    # The reader, asked by the orchestrator, may ask the clerk; the clerk, asked by that reader, may not ask
    # the reader back (nor the orchestrator above them).
    assert offered(alice, "reader", path=["default"], depth=1) == ["ask_clerk"]
    assert offered(alice, "clerk", path=["default", "reader"], depth=2) == []


def test_no_member_is_offered_past_the_depth_limit(alice: Any) -> None:
    with assistant_settings_with(SPECS=SOCIETY, MAX_DELEGATION_DEPTH=2):
        assert [tool.name for tool in delegation_tools(owner=alice, asking="reader", depth=1)] == ["ask_clerk"]
        assert delegation_tools(owner=alice, asking="reader", depth=2) == []


def test_a_spec_without_delegates_is_offered_none(alice: Any) -> None:
    with assistant_settings_with(SPECS={"reader": SOCIETY["reader"] | {"delegates": []}}):
        assert delegation_tools(owner=alice, asking="reader") == []


def test_a_spec_name_no_provider_accepts_as_a_tool_name_is_an_error() -> None:
    specs = {"default": {"role": "Routes.", "delegates": ["project keeper"]},
             "project keeper": {"role": "Keeps projects.", "permission_profile": "standard"}}
    with assistant_settings_with(SPECS=specs):
        found = [message for message in run_checks() if message.id == "assistant.E035"]
    assert len(found) == 1 and "'ask_project keeper'" in found[0].msg
