"""Where a plain request goes without a model call (assistant/society/routing.py), for the test society's
`test-router`, which may ask `test-viewer` (restricted: reads only), `test-clerk` (task writes and the task list)
and `test-desk` (projects; it asks the clerk): the member that may do the request's one intent, the one the
registry's records put clearly ahead, or the one with least authority; and nothing at all for what is not plain."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from assistant.conversation.services import chat_send
from assistant.models import AgentChat
from assistant.runs.lifecycle import run_routed_config
from assistant.society.members import member
from assistant.society.offer import delegation_tools
from assistant.society.routing import Route, plain_intent_of, plain_route
from registry.services import profile_record_invocation
from tests.conftest import assistant_settings_with

pytestmark = pytest.mark.django_db


def route(person: Any, request: str, asking: str = "test-router") -> Route | None:
    """As a run's first step does it: the request's plain intent, the members ranked for it, then the route."""
    seat = member(asking)
    intent = plain_intent_of(owner=person, asking=seat, request=request, members=seat.delegates)
    if intent is None:
        return None
    return plain_route(intent=intent, offered=delegation_tools(owner=person, asking=seat, intent=intent.name))


def record(person: Any, spec: str, intent: str, *, runs: int, successes: int) -> None:
    for index in range(runs):
        profile_record_invocation(owner=person, spec_name=spec, entry={
            "run_id": index + 1, "status": "success" if index < successes else "error", "intent": intent})


def test_a_request_only_one_member_may_do_goes_to_it(alice: Any) -> None:
    routed = route(alice, "Add the task 'Buy milk' to the project 'Home'")
    assert routed is not None
    assert (routed.tool.name, routed.intent) == ("ask_test-clerk", "tracker_task_create")
    assert routed.reason == "routed to test-clerk: intent tracker_task_create, the only member that may do it"


def test_with_no_record_to_tell_them_apart_a_read_goes_to_the_member_with_least_authority(alice: Any) -> None:
    routed = route(alice, "list my open tasks")
    assert routed is not None and routed.tool.member == "test-viewer"
    assert routed.reason.endswith("the member that may do it with the least authority (restricted)")


def test_a_record_clearly_ahead_wins_and_close_records_leave_it_to_the_model(alice: Any, bob: Any) -> None:
    record(alice, "test-clerk", "tracker_task_list", runs=10, successes=10)
    record(alice, "test-viewer", "tracker_task_list", runs=10, successes=5)
    routed = route(alice, "list my open tasks")
    assert routed is not None
    assert routed.reason == (
        "routed to test-clerk: intent tracker_task_list, 100% success over 10 runs, 10 of them for it")

    # The clerk five points ahead of the reader, which may do it with less authority: the model weighs them.
    record(bob, "test-clerk", "tracker_task_list", runs=10, successes=9)
    record(bob, "test-viewer", "tracker_task_list", runs=20, successes=17)
    assert route(bob, "list my open tasks") is None


def test_the_member_with_least_authority_keeps_its_requests_once_its_record_puts_it_first(alice: Any) -> None:
    """A record of its own (the other member has none yet) does not take a read from the member that only reads:
    the ranking puts it first, and it may do it with the least authority."""
    record(alice, "test-viewer", "tracker_task_list", runs=6, successes=6)
    routed = route(alice, "list my open tasks")
    assert routed is not None and routed.tool.member == "test-viewer"


def test_a_record_that_puts_a_wider_member_first_without_a_clear_lead_leaves_it_to_the_model(alice: Any) -> None:
    record(alice, "test-clerk", "tracker_task_list", runs=6, successes=6)
    assert route(alice, "list my open tasks") is None


@pytest.mark.parametrize("request_text", [
    "hello!",
    "what can you do?",
    "delete it",
    "Add the task 'a' to the project 'Home', then list my open tasks",
    "",
])
def test_what_is_not_plain_goes_to_the_model(alice: Any, request_text: str) -> None:
    assert route(alice, request_text) is None


def test_what_the_asking_spec_does_itself_is_not_handed_on(alice: Any) -> None:
    assert route(alice, "Create the project 'Garden'", asking="test-desk") is None
    routed = route(alice, "Add the task 'Dig' to the project 'Garden'", asking="test-desk")
    assert routed is not None and routed.tool.member == "test-clerk"


def test_a_routed_run_takes_its_members_settings_within_what_it_had_and_keeps_what_it_was_sent_with(
    alice: Any,
) -> None:
    """The run a request is routed to has the member's model, instructions and profile; each limit is the smaller
    of the member's own and the run's (a member asked never has more than its asker left); its page and place in
    a tree stay; and it says where it came from."""
    chat = AgentChat.objects.create(owner=alice, spec="test-router")
    with assistant_settings_with(SPECS={**settings.ASSISTANT["SPECS"], "test-viewer": {
            **settings.ASSISTANT["SPECS"]["test-viewer"], "limits": {"max_model_calls": 4, "max_tool_calls": 50}}}):
        run = chat_send(user=alice, content="list my open tasks", chat_id=chat.pk).run
        run.config = {**run.config, "max_model_calls": 9, "max_tool_calls": 3, "page": {"url": "/tracker/"}}
        routed = run_routed_config(run, "test-viewer", reason="routed to test-viewer: why")
    assert (routed["spec"], routed["permission_profile"]) == ("test-viewer", "restricted")
    assert (routed["max_model_calls"], routed["max_tool_calls"]) == (4, 3)
    assert routed["page"] == {"url": "/tracker/"}
    assert routed["routed"] == {"from": "test-router", "reason": "routed to test-viewer: why"}
