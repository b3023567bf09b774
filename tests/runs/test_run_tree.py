"""A run knows its tree: the run that handed it work (`parent`), the top run (`root`) and its depth. The chat
still has one active top run; the children working for it are not a second one."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from assistant.conversation.services import Refused, chat_send
from assistant.live.selectors import chat_active_run
from assistant.models import AgentChat, AgentRun

pytestmark = pytest.mark.django_db


def child_of(parent: AgentRun, **fields: Any) -> AgentRun:
    return AgentRun.objects.create(owner=parent.owner, chat=parent.chat, spec="reader", parent=parent,
                                   root=parent.root or parent, depth=parent.depth + 1, task="List my tasks.",
                                   **fields)


def test_children_work_beside_their_active_top_run_in_its_chat(alice: Any) -> None:
    top = chat_send(user=alice, content="what is open?").run
    child = child_of(top, status="running")
    grandchild = child_of(child)

    assert (child.root_id, grandchild.root_id, grandchild.depth) == (top.pk, top.pk, 2)
    assert set(top.descendants.all()) == {child, grandchild}
    # The chat's active run is the top run, whatever its children do.
    assert chat_active_run(chat=top.chat) == top
    # And a second top run in the chat is still refused, by the send and by the database.
    with pytest.raises(Refused) as refused:
        chat_send(user=alice, content="and another thing", chat_id=top.chat_id)
    assert refused.value.code == "run_active"
    with pytest.raises(IntegrityError), transaction.atomic():
        AgentRun.objects.create(owner=alice, chat=top.chat)


@pytest.mark.parametrize("shape", [
    {"depth": 1},  # a top run is at depth 0
    {"parent": "top", "depth": 1},  # a child names its tree's top run
    {"parent": "top", "root": "top", "depth": 0},  # and is below it
], ids=["deep top run", "child without root", "child at depth 0"])
def test_a_run_whose_place_in_its_tree_does_not_add_up_is_refused(alice: Any, shape: dict[str, Any]) -> None:
    top = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="succeeded")
    fields = {key: top if value == "top" else value for key, value in shape.items()}
    with pytest.raises(IntegrityError), transaction.atomic():
        AgentRun.objects.create(owner=alice, chat=top.chat, status="succeeded", **fields)


def test_a_top_run_goes_with_its_whole_tree(alice: Any) -> None:
    top = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="succeeded")
    child_of(child_of(top, status="succeeded"), status="succeeded")
    top.delete()
    assert not AgentRun.objects.exists()


def test_staff_see_a_runs_place_in_its_tree_and_can_list_top_runs_or_members_runs(
    alice: Any, user_factory: Any
) -> None:
    top = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="succeeded")
    child = child_of(top, status="failed", stop_reason="max_tool_calls", total_tokens=1234)
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))

    page = staff.get(f"/admin/assistant/agentrun/{top.pk}/change/").content.decode()
    members = page.split('class="run-members"')[1].split("</dd>")[0]
    assert f"run {child.pk}</a>: reader · Failed (<code>max_tool_calls</code>)" in members
    assert "1,234 tokens" in members or "1234 tokens" in members
    page = staff.get(f"/admin/assistant/agentrun/{child.pk}/change/").content.decode()
    asked_by = page.split('class="run-asked-by"')[1].split("</dd>")[0]
    assert f"run {top.pk}</a> (default), 1 level below" in asked_by

    def listed(query: str) -> set[int]:
        # The rows themselves: a member's row links to the run that asked it too.
        return {run.pk for run in staff.get(f"/admin/assistant/agentrun/{query}").context["cl"].result_list}

    assert listed("?tree=top") == {top.pk}
    assert listed("?tree=member") == {child.pk}
    assert listed("") == {top.pk, child.pk}


def test_a_members_record_says_who_asked_it_and_its_profile_page_counts_them(
    alice: Any, user_factory: Any
) -> None:
    from assistant.runs.lifecycle import run_finish
    from registry.models import AgentProfile

    chat = AgentChat.objects.create(owner=alice)
    for spec, count in (("default", 2), ("triage", 1)):
        for _ in range(count):
            asker = AgentRun.objects.create(owner=alice, chat=chat, spec=spec, status="succeeded")
            run_finish(run=child_of(asker, status="running"), status="succeeded", reply="Done.")
    run_finish(run=AgentRun.objects.create(owner=alice, chat=chat, spec="reader"), status="succeeded", reply="Hi.")

    profile = AgentProfile.objects.get(owner=alice, spec_name="reader")
    assert sorted(entry.get("asked_by") or "" for entry in profile.window) == ["", "default", "default", "triage"]
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    body = staff.get(f"/admin/registry/agentprofile/{profile.pk}/change/").content.decode()
    table = body.split('data-table="askers"')[1].split("</table>")[0]
    rows = [row.split("</th>")[0] + " " + row.split("<td>")[1].split("</td>")[0]
            for row in table.split('<tr><th scope="row">')[1:]]
    assert rows == ["the spec “default” 2", "the person, directly 1", "the spec “triage” 1"]
