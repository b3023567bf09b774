"""Random payloads for every tracker tool: never an unhandled exception, never a change to Bob's rows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.tools import STATUSES, execute_tool, tools_for
from tracker.models import Comment, Project, Task

pytestmark = pytest.mark.django_db



def _bobs_world(bob: Any) -> tuple[list[Any], ...]:
    projects = Project.objects.filter(owner=bob).order_by("pk")
    tasks = Task.objects.filter(project__in=projects).order_by("pk")
    comments = Comment.objects.filter(task__in=tasks).order_by("pk")
    return (
        list(projects.values_list("pk", "name", "description", "archived", "owner_id")),
        list(tasks.values_list("pk", "title", "description", "status", "priority", "assignee_id", "due_date",
                               "estimate_hours", "completed_at")),
        list(comments.values_list("pk", "body", "author_id")),
    )


@pytest.fixture
def world(alice: Any, bob: Any) -> dict[str, Any]:
    home = Project.objects.create(owner=alice, name="Home")
    alice_task = Task.objects.create(project=home, title="Buy milk")
    website = Project.objects.create(owner=bob, name="Website")
    bob_task = Task.objects.create(project=website, title="Draft")
    Comment.objects.create(task=bob_task, author=bob, body="first")
    ids = [home.pk, alice_task.pk, website.pk, bob_task.pk, alice.pk, bob.pk, 0, -1, 10**12]
    names = sorted(t.name for t in tools_for(alice) if t.name.startswith("tracker_"))
    schemas = {t.name: t.parameters for t in tools_for(alice)}
    return {"alice": alice, "bob": bob, "ids": ids, "names": names, "schemas": schemas}


def _values(ids: list[int]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.sampled_from(ids), st.integers(), st.floats(allow_nan=True),
        st.text(max_size=30), st.sampled_from(["Home", "Website", "todo", "done", "2030-01-01", "x" * 6000, ""]),
    )
    return st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=5), scalars,
                                                                             max_size=2))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_payloads_never_crash_and_never_touch_bobs_rows(world: dict[str, Any], data: st.DataObject) -> None:
    before = _bobs_world(world["bob"])
    name = data.draw(st.sampled_from(world["names"]), label="tool")
    known = list(world["schemas"][name]["properties"])
    keys = st.one_of(st.sampled_from(known), st.text(max_size=10)) if known else st.text(max_size=10)
    arguments = data.draw(st.dictionaries(keys, _values(world["ids"]), max_size=6), label="arguments")

    outcome = execute_tool(world["alice"], name, arguments)

    assert outcome.status in STATUSES
    assert outcome.status != "error", outcome
    assert _bobs_world(world["bob"]) == before
    json.dumps(outcome.to_model())  # always serialisable for the model
