"""Firing tracker tools as a user: same rows and messages as the browser, nothing across users."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.test import Client

from assistant.tools import execute_tool
from tracker.models import Comment, Project, Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def home(alice: Any) -> Project:
    return Project.objects.create(owner=alice, name="Home")


@pytest.fixture
def website(bob: Any) -> Project:
    return Project.objects.create(owner=bob, name="Website", description="Bob's band site")


def _rows(model: Any, *fields: str) -> list[tuple[Any, ...]]:
    return list(model.objects.order_by("pk").values_list(*fields))


def _browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_create_edit_complete_match_the_browser_path(alice: Any, home: Project) -> None:
    fields = ("title", "description", "status", "priority", "due_date", "estimate_hours", "created_by")
    browser = _browser(alice)
    # The browser path, as a person fills in the forms.
    created = browser.post("/tracker/tasks/new/", {"project": home.pk, "title": "Buy milk", "priority": "2",
                                                   "due_date": "2030-01-02", "estimate_hours": "0.5"}, follow=True)
    by_browser = Task.objects.get()
    edit_form = browser.get(f"/tracker/tasks/{by_browser.pk}/edit/").context["form"]
    edit_data = {name: edit_form[name].value() or "" for name in edit_form.fields}
    edited = browser.post(f"/tracker/tasks/{by_browser.pk}/edit/", {**edit_data, "title": "Buy oat milk"}, follow=True)
    completed = browser.post(f"/tracker/tasks/{by_browser.pk}/complete/", follow=True)
    # What the person sees on the page each form led to.
    browser_messages = [[str(m) for m in r.context["messages"]] for r in (created, edited, completed)]
    browser_rows = _rows(Task, *fields)
    Task.objects.all().delete()

    outcome = execute_tool(alice, "tracker_task_create", {"project": "Home", "title": "Buy milk",
                                                           "due_date": "2030-01-02", "estimate_hours": 0.5})
    assert (outcome.status, outcome.took_effect) == ("done", True), outcome
    task = Task.objects.get()
    assert outcome.data["redirect"] == f"/tracker/tasks/{task.pk}/"
    edit = execute_tool(alice, "tracker_task_update", {"pk": task.pk, "title": "Buy oat milk"})
    complete = execute_tool(alice, "tracker_task_complete", {"pk": task.pk})

    assert [[m["text"] for m in o.data["messages"]] for o in (outcome, edit, complete)] == browser_messages
    assert _rows(Task, *fields) == browser_rows
    assert browser_rows[0][:3] == ("Buy oat milk", "", "done")


def test_form_errors_come_back_by_field_and_nothing_is_written(alice: Any, home: Project) -> None:
    outcome = execute_tool(alice, "tracker_task_create", {"project": home.pk, "title": "x", "estimate_hours": -1})

    assert outcome.status == "invalid" and not outcome.took_effect
    assert list(outcome.data["errors"]) == ["estimate_hours"]
    assert "greater than or equal to 0" in outcome.data["errors"]["estimate_hours"][0]
    assert not Task.objects.exists()
    assert outcome.to_model()["data"]["errors"]["estimate_hours"]


@pytest.mark.parametrize(
    ("arguments", "bad"),
    [
        ({"title": "no project"}, "project"),
        ({"project": 1, "title": "t", "colour": "red"}, "colour"),
        ({"project": 1, "title": 42}, "title"),
        ({"project": 1, "title": "x" * 201}, "title"),
        ({"project": 1, "title": "t", "priority": 7}, "priority"),
        ({"project": 1, "title": "t", "due_date": "next week"}, "due_date"),
        ({"project": True, "title": "t"}, "project"),
    ],
)
def test_bad_arguments_get_a_precise_error_and_write_nothing(alice: Any, home: Project, arguments: dict[str, Any],
                                                            bad: str) -> None:
    outcome = execute_tool(alice, "tracker_task_create", arguments)

    assert outcome.status == "invalid" and not outcome.took_effect
    assert bad in outcome.data["errors"]
    assert not Task.objects.exists()


def test_an_invented_tool_name_is_refused(alice: Any) -> None:
    outcome = execute_tool(alice, "tracker_drop_database", {})
    assert outcome.status == "invalid" and "no tool named" in outcome.reason
    assert execute_tool(alice, ["not", "a", "name"], {}).status == "invalid"  # type: ignore[arg-type]
    assert execute_tool(alice, "tracker_task_list", "not a dict").status == "invalid"  # type: ignore[arg-type]


def test_alice_cannot_touch_bobs_project_and_learns_nothing(alice: Any, bob: Any, website: Project) -> None:
    task = Task.objects.create(project=website, title="Draft the gig page")
    before = (_rows(Project, "id", "name", "archived"), _rows(Task, "id", "title", "status"))
    missing = 10_000_000

    create = execute_tool(alice, "tracker_task_create", {"project": website.pk, "title": "Sneaky"})
    create_missing = execute_tool(alice, "tracker_task_create", {"project": missing, "title": "Sneaky"})
    assert create.status == create_missing.status == "invalid"
    assert create.data["errors"] == create_missing.data["errors"]

    for name, args in [
        ("tracker_project_delete", {"pk": website.pk}),
        ("tracker_project_archive", {"pk": website.pk, "archived": True}),
        ("tracker_project_update", {"pk": website.pk, "name": "Mine now"}),
        ("tracker_project_stats", {"pk": website.pk}),
        ("tracker_task_detail", {"pk": task.pk}),
        ("tracker_task_update", {"pk": task.pk, "title": "Mine now"}),
        ("tracker_task_complete", {"pk": task.pk}),
        ("tracker_task_delete", {"pk": task.pk}),
        ("tracker_comment_create", {"pk": task.pk, "body": "hello"}),
    ]:
        real = execute_tool(alice, name, args)
        absent = execute_tool(alice, name, {**args, "pk": missing})
        assert real.status == "not_found" and not real.took_effect, (name, real)
        assert real.to_model() == absent.to_model(), name

    reads = [execute_tool(alice, "tracker_project_list", {}), execute_tool(alice, "tracker_task_list", {}),
             execute_tool(alice, "tracker_task_list", {"project": website.pk}),
             execute_tool(alice, "tracker_comment_list", {"task": task.pk})]
    assert all(o.status == "data" and o.data["results"] == [] for o in reads)
    assert (_rows(Project, "id", "name", "archived"), _rows(Task, "id", "title", "status")) == before
    assert not Comment.objects.exists()


def test_a_member_who_is_not_the_owner_is_denied_not_hidden(alice: Any, bob: Any, home: Project) -> None:
    home.members.add(bob)

    outcome = execute_tool(bob, "tracker_project_delete", {"pk": home.pk})

    assert outcome.status == "denied" and not outcome.took_effect
    assert Project.objects.filter(pk=home.pk).exists()
    assert execute_tool(bob, "tracker_task_create", {"project": home.pk, "title": "Shared"}).status == "done"


def test_delete_archive_and_comment_as_the_owner(alice: Any, home: Project) -> None:
    task = Task.objects.create(project=home, title="Fix tap")

    comment = execute_tool(alice, "tracker_comment_create", {"pk": task.pk, "body": "Washer needed"})
    archive = execute_tool(alice, "tracker_project_archive", {"pk": home.pk, "archived": True})
    assert (comment.status, archive.status) == ("done", "done")
    assert Comment.objects.get().author == alice
    assert Project.objects.get().archived
    empty = execute_tool(alice, "tracker_comment_create", {"pk": task.pk, "body": ""})
    assert empty.status == "invalid" and "body" in empty.data["errors"]

    delete = execute_tool(alice, "tracker_project_delete", {"pk": home.pk})
    assert delete.status == "done" and delete.data["messages"][0]["text"] == "Project “Home” deleted."
    assert not Project.objects.exists() and not Task.objects.exists()


def test_json_and_detail_views_hand_back_data(alice: Any, home: Project) -> None:
    today = datetime.date.today()
    Task.objects.create(project=home, title="Late", due_date=today - datetime.timedelta(days=1))
    done = Task.objects.create(project=home, title="Done", status="done", estimate_hours="1.5")

    stats = execute_tool(alice, "tracker_project_stats", {"pk": home.pk})
    detail = execute_tool(alice, "tracker_task_detail", {"pk": done.pk})

    assert stats.status == "data" and not stats.took_effect
    assert stats.data == {"project": "Home", "by_status": {"todo": 1, "doing": 0, "done": 1}, "overdue": 1}
    assert detail.status == "data"
    assert detail.data == {"id": done.pk, "title": "Done", "description": "", "status": "done", "priority": 2,
                           "due_date": None, "estimate_hours": 1.5, "project": home.pk, "project__name": "Home",
                           "assignee__username": None, "completed_at": None, "url": f"/tracker/tasks/{done.pk}/"}


def test_reads_return_only_the_callers_rows_and_declared_fields(alice: Any, bob: Any, home: Project,
                                                                 website: Project) -> None:
    for n in range(7):
        Task.objects.create(project=home, title=f"Home task {n}", priority=1 + n % 3,
                            status="done" if n == 0 else "todo")
    Task.objects.create(project=website, title="Bob's task")

    everything = execute_tool(alice, "tracker_task_list", {"limit": 50})
    assert everything.status == "data" and everything.data["returned"] == 7
    # The declared fields, and each task's page (its get_absolute_url), for an answer to link to.
    assert set(everything.data["results"][0]) == {"id", "title", "status", "priority", "due_date", "project",
                                                  "project__name", "assignee__username", "url"}
    assert all(row["url"] == f"/tracker/tasks/{row['id']}/" for row in everything.data["results"])
    assert {row["project"] for row in everything.data["results"]} == {home.pk}

    open_high = execute_tool(alice, "tracker_task_list", {"status__in": ["todo", "doing"], "ordering": "-priority",
                                                          "limit": 3})
    rows = open_high.data["results"]
    assert len(rows) == 3 and open_high.data["truncated"] is True
    assert [r["priority"] for r in rows] == [3, 3, 2] and all(r["status"] == "todo" for r in rows)
    searched = execute_tool(alice, "tracker_task_list", {"search": "task 4"})
    assert [r["title"] for r in searched.data["results"]] == ["Home task 4"]
    ranged = execute_tool(alice, "tracker_task_list", {"priority__gte": 3, "title__contains": "TASK"})
    assert {r["priority"] for r in ranged.data["results"]} == {3}

    too_many = execute_tool(alice, "tracker_task_list", {"limit": 51})
    assert too_many.status == "invalid" and "at most 50" in too_many.data["errors"]["limit"]
    assert execute_tool(alice, "tracker_task_list", {"owner": 1}).status == "invalid"


def test_read_limit_follows_the_setting(alice: Any, home: Project, settings: Any) -> None:
    Task.objects.bulk_create([Task(project=home, title=f"t{n}") for n in range(5)])
    settings.ASSISTANT = {"READ_LIMIT_MAX": 2}

    assert execute_tool(alice, "tracker_task_list", {"limit": 3}).status == "invalid"
    outcome = execute_tool(alice, "tracker_task_list", {})
    assert outcome.data["returned"] == 2 and outcome.data["truncated"] is True


def test_anonymous_and_inactive_users_are_refused(alice: Any, home: Project) -> None:
    from django.contrib.auth.models import AnonymousUser

    assert execute_tool(AnonymousUser(), "tracker_task_list", {}).status == "denied"
    alice.is_active = False
    outcome = execute_tool(alice, "tracker_task_create", {"project": home.pk, "title": "t"})
    assert outcome.status == "denied" and not Task.objects.exists()
