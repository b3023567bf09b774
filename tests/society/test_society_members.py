"""Specs as members: their own role, instructions, model and limits, whom they may ask, and what
`manage.py check` says about a society that is declared wrong."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import ERROR, WARNING, run_checks

from assistant.conversation.services import chat_send
from assistant.runs.lifecycle import run_config
from assistant.society import member
from tests.conftest import assistant_settings_with

READER = {"tools": ["tracker_task_list"], "permission_profile": "restricted", "role": "Reads tasks and projects."}
CLERK = {"tools": ["tracker_task_create"], "permission_profile": "standard", "role": "Adds and updates tasks."}


def society_messages(**specs: Any) -> list[tuple[str, str]]:
    with assistant_settings_with(SPECS=specs):
        found = run_checks()
    return [(message.id, message.msg) for message in found
            if message.id and message.id.startswith("assistant.E03") or message.id == "assistant.W030"]


def ids(messages: list[tuple[str, str]]) -> list[str]:
    return sorted(message_id for message_id, _ in messages)


# --- a spec as a run under it uses it ------------------------------------------------------------------


def test_a_spec_with_only_tools_and_a_profile_runs_as_it_always_did() -> None:
    with assistant_settings_with(SPECS={"reader": {"tools": "__all__", "permission_profile": "restricted"}},
                                 MODEL="offline", MAX_MODEL_CALLS=8, INSTRUCTIONS="Be brief."):
        config = run_config(spec="reader")
        assert member("reader").delegates == ()
    assert (config["model"], config["instructions"], config["max_model_calls"]) == ("offline", "Be brief.", 8)
    assert config["permission_profile"] == "restricted"


def test_a_member_runs_with_its_own_model_instructions_and_limits_within_the_global_ones() -> None:
    clerk = {**CLERK, "model": "scripted:/tmp/clerk.json", "instructions": "You add tasks.",
             "limits": {"max_model_calls": 3, "max_tokens_per_run": 999_999}}
    with assistant_settings_with(SPECS={"clerk": clerk}, MAX_MODEL_CALLS=8, MAX_TOKENS_PER_RUN=50_000):
        config = run_config(spec="clerk")
        seat = member("clerk")
    assert (config["model"], config["instructions"]) == ("scripted:/tmp/clerk.json", "You add tasks.")
    # Its own limit where lower; never above the global one, whatever it declares.
    assert (config["max_model_calls"], config["max_tokens_per_run"]) == (3, 50_000)
    assert (seat.role, seat.profile.name) == ("Adds and updates tasks.", "standard")


@pytest.mark.django_db
def test_a_run_keeps_its_specs_settings_as_it_was_queued(alice: Any) -> None:
    with assistant_settings_with(SPEC="clerk", SPECS={"clerk": {**CLERK, "limits": {"max_tool_calls": 2}}}):
        run = chat_send(user=alice, content="add a task").run
    assert (run.spec, run.config["max_tool_calls"], run.config["permission_profile"]) == ("clerk", 2, "standard")


# --- what manage.py check says ----------------------------------------------------------------------------


def test_a_well_formed_society_passes_the_checks() -> None:
    orchestrator = {"tools": ["tracker_task_list"], "permission_profile": "standard", "role": "Routes requests.",
                    "delegates": ["reader", "clerk"]}
    assert society_messages(default=orchestrator, reader=READER, clerk=CLERK) == []


def test_a_delegate_that_is_not_a_spec_is_an_error_naming_it() -> None:
    [(message_id, text)] = society_messages(default={"role": "Routes.", "delegates": ["raeder"]}, reader=READER)
    assert message_id == "assistant.E031" and "'raeder'" in text


@pytest.mark.parametrize(("specs", "circle"), [
    ({"a": {"role": "A", "delegates": ["b"]}, "b": {"role": "B", "delegates": ["a"]}}, "a → b → a"),
    ({"a": {"role": "A", "delegates": ["a"]}}, "a → a"),
    ({"a": {"role": "A", "delegates": ["b"]}, "b": {"role": "B", "delegates": ["c"]},
      "c": {"role": "C", "delegates": ["a"]}}, "a → b → c → a"),
], ids=["two", "itself", "three"])
def test_a_circle_of_delegation_is_an_error_showing_the_circle(specs: dict[str, Any], circle: str) -> None:
    messages = society_messages(**specs)
    assert ids(messages) == ["assistant.E032"]
    assert circle in messages[0][1]


@pytest.mark.parametrize(("asker", "delegate"), [("restricted", "standard"), ("standard", "trusted")])
def test_a_delegate_that_may_do_more_than_the_spec_asking_it_is_an_error(asker: str, delegate: str) -> None:
    messages = society_messages(boss={"permission_profile": asker, "role": "Boss.", "delegates": ["helper"]},
                                helper={"permission_profile": delegate, "role": "Helper."})
    assert ids(messages) == ["assistant.E033"]
    assert "'helper'" in messages[0][1] and delegate in messages[0][1]


def test_a_narrower_delegate_is_fine() -> None:
    assert society_messages(boss={"permission_profile": "trusted", "role": "Boss.", "delegates": ["reader"]},
                            reader=READER) == []


@pytest.mark.parametrize("spec", [
    {"role": "x", "limits": {"max_model_calls": 99}},
    {"role": "x", "limits": {"max_model_calls": 0}},
    {"role": "x", "limits": {"max_tool_calsl": 3}},
    {"role": "x", "limits": [3]},
], ids=["above the global limit", "not positive", "misspelt", "not a dict"])
def test_limits_a_spec_cannot_have_are_errors(spec: dict[str, Any]) -> None:
    assert ids(society_messages(clerk=spec)) == ["assistant.E034"]


@pytest.mark.parametrize("spec", [
    {"tools": "__all__", "rol": "typo"},
    {"role": 3},
    {"delegates": "reader"},
    "reader",
], ids=["unknown key", "role not text", "delegates not a list", "not a dict"])
def test_a_malformed_spec_is_an_error(spec: Any) -> None:
    messages = [m for m in society_messages(clerk=spec) if m[0] != "assistant.E031"]
    assert "assistant.E030" in ids(messages)


@pytest.mark.parametrize("key", ["handoff", "routing"])
def test_a_handoff_or_routing_that_is_not_a_choice_is_an_error_naming_the_choices(key: str) -> None:
    [(message_id, message)] = society_messages(clerk={**CLERK, key: "sometimes"})
    assert (message_id, message) == ("assistant.E038", f"SPECS['clerk'][{key!r}] is 'sometimes'.")
    with assistant_settings_with(**{key.upper(): "always"}):
        assert [m.hint for m in run_checks() if m.id == "assistant.E038"] == [
            "Choose one of: auto, never (auto by default)."]
    assert society_messages(clerk={**CLERK, key: "never"}) == []


def test_a_delegate_without_a_role_is_a_warning_because_the_model_would_know_nothing_of_it() -> None:
    with assistant_settings_with(SPECS={"default": {"role": "Routes.", "delegates": ["reader"]},
                                        "reader": {"permission_profile": "restricted"}}):
        found = [m for m in run_checks() if m.id == "assistant.W030"]
    assert [(m.level, "'reader'" in m.msg) for m in found] == [(WARNING, True)]
    assert all(m.level != ERROR for m in found)
