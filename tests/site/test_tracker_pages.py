"""The tracker works for people without the assistant: scoped pages, forms, messages, owner-only actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from tracker.demo import seed_demo
from tracker.models import Comment, Project, Task

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_projects_and_tasks_are_listed_only_for_owner_and_members(alice: Any, bob: Any) -> None:
    Project.objects.create(owner=alice, name="Home")
    shared = Project.objects.create(owner=bob, name="Trip")
    shared.members.add(alice)
    Project.objects.create(owner=bob, name="Bob's secret")

    page = _client(alice).get("/tracker/")

    assert page.status_code == 200
    names = [p.name for p in page.context["projects"]]
    assert names == ["Home", "Trip"]
    assert b"Bob&#x27;s secret" not in page.content and b"Bob's secret" not in page.content


def test_creating_a_task_redirects_with_a_message_and_records_the_creator(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")

    response = _client(alice).post("/tracker/tasks/new/", {"project": home.pk, "title": "Buy milk", "priority": 2})

    task = Task.objects.get(title="Buy milk")
    assert response.status_code == 302 and response["Location"] == f"/tracker/tasks/{task.pk}/"
    assert (task.project, task.created_by, task.status) == (home, alice, "todo")
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Task “Buy milk” added to Home."]


def test_a_task_cannot_be_created_in_someone_elses_project(alice: Any, bob: Any) -> None:
    bobs = Project.objects.create(owner=bob, name="Website")

    response = _client(alice).post("/tracker/tasks/new/", {"project": bobs.pk, "title": "Sneaky", "priority": 2})

    assert response.status_code == 200
    assert "project" in response.context["form"].errors
    assert not Task.objects.exists()


def test_members_edit_and_complete_tasks_but_only_the_owner_deletes_the_project(alice: Any, bob: Any) -> None:
    trip = Project.objects.create(owner=alice, name="Trip")
    trip.members.add(bob)
    task = Task.objects.create(project=trip, title="Pack")
    as_bob = _client(bob)

    assert as_bob.post(f"/tracker/tasks/{task.pk}/complete/").status_code == 302
    task.refresh_from_db()
    assert task.status == "done" and task.completed_at is not None
    assert as_bob.post(f"/tracker/projects/{trip.pk}/delete/").status_code == 403
    assert as_bob.post(f"/tracker/projects/{trip.pk}/archive/", {"archived": "on"}).status_code == 403
    assert Project.objects.filter(pk=trip.pk, archived=False).exists()

    assert _client(alice).post(f"/tracker/projects/{trip.pk}/delete/").status_code == 302
    assert not Project.objects.exists() and not Task.objects.exists()


def test_someone_elses_objects_are_not_found(alice: Any, bob: Any) -> None:
    bobs = Project.objects.create(owner=bob, name="Website")
    task = Task.objects.create(project=bobs, title="Draft")
    as_alice = _client(alice)

    for url in [f"/tracker/projects/{bobs.pk}/", f"/tracker/tasks/{task.pk}/", f"/tracker/tasks/{task.pk}/edit/"]:
        assert as_alice.get(url).status_code == 404
    assert as_alice.post(f"/tracker/tasks/{task.pk}/comments/", {"body": "hi"}).status_code == 404
    assert not Comment.objects.exists()


def test_every_page_renders_in_the_site_shell(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    task = Task.objects.create(project=home, title="Fix tap")
    Comment.objects.create(task=task, author=alice, body="Washer needed")
    client = _client(alice)
    urls = ["/", "/tracker/", "/tracker/?archived=1", "/tracker/projects/new/", f"/tracker/projects/{home.pk}/",
            f"/tracker/projects/{home.pk}/edit/", f"/tracker/projects/{home.pk}/delete/", "/tracker/tasks/",
            "/tracker/tasks/?status=done", f"/tracker/tasks/new/?project={home.pk}", f"/tracker/tasks/{task.pk}/",
            f"/tracker/tasks/{task.pk}/edit/", f"/tracker/tasks/{task.pk}/delete/"]
    for url in urls:
        page = client.get(url)
        assert page.status_code == 200, url
        assert b'class="site-header"' in page.content and b"Projects</a>" in page.content, url
    assert b"Washer needed" in client.get(f"/tracker/tasks/{task.pk}/").content
    assert b"Fix tap" in client.get("/").content


def test_seed_demo_is_idempotent_and_shares_one_project() -> None:
    seed_demo()
    counts = (Project.objects.count(), Task.objects.count())
    seed_demo()

    assert (Project.objects.count(), Task.objects.count()) == counts
    shared = Project.objects.get(members__username="bob")
    assert shared.owner.username == "alice"
    for name in ("alice", "bob"):
        assert Project.objects.filter(owner__username=name).count() >= 2
