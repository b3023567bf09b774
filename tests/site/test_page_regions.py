"""The tracker's pages keep up with the assistant: their regions re-fetch themselves when the panel
raises `assistant:changed`, and an htmx request (`HX-Request: true`) gets just that region, as the same
person, with the same filters and page; an ordinary request gets the whole page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tracker.models import Project, Task

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
TRIGGER = 'hx-trigger="assistant:changed from:body'


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def region(html: str, region_id: str) -> str:
    """The opening tag of the element with that id."""
    match = re.search(rf'<[a-z]+ id="{region_id}"[^>]*>', html)
    assert match, f"no #{region_id} in the page"
    return match.group(0)


def assert_only_the_fragment(response: Any, region_id: str) -> str:
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<section id="{region_id}"'), html[:200]
    assert "<html" not in html and 'class="site-header"' not in html and "assistant-dock" not in html
    assert "HX-Request" in response.get("Vary", ""), "a cache must not hand the fragment out for the page"
    return html


def test_the_project_list_is_a_region_that_refreshes_on_assistant_changed(alice: Any) -> None:
    Project.objects.create(owner=alice, name="Home")

    page = signed_in(alice).get("/tracker/").content.decode()

    opening = region(page, "projects")
    assert 'hx-get="/tracker/"' in opening and TRIGGER in opening and 'hx-swap="outerHTML"' in opening
    assert 'class="site-header"' in page  # the whole page without htmx


def test_an_htmx_request_for_the_project_list_gets_only_the_region_scoped_to_the_person(
    alice: Any, bob: Any
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    Project.objects.create(owner=bob, name="Bob's secret")
    Project.objects.create(owner=alice, name="Old", archived=True)

    html = assert_only_the_fragment(signed_in(alice).get("/tracker/", **HTMX), "projects")

    assert "Home" in html and "1 open task" in html
    assert "secret" not in html and "Old" not in html
    # The refreshed region goes on listening: it carries its own trigger.
    assert TRIGGER in region(html, "projects")


def test_the_project_list_region_keeps_its_filter(alice: Any) -> None:
    Project.objects.create(owner=alice, name="Home")
    Project.objects.create(owner=alice, name="Old", archived=True)

    html = assert_only_the_fragment(signed_in(alice).get("/tracker/?archived=1", **HTMX), "projects")

    assert "Old" in html and "Home" not in html
    assert 'hx-get="/tracker/?archived=1"' in region(html, "projects")


def test_an_htmx_request_for_a_project_gets_its_region_with_the_current_tasks(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    Task.objects.create(project=home, title="Paint the door", status=Task.Status.DONE)
    url = f"/tracker/projects/{home.pk}/"

    page = signed_in(alice).get(url).content.decode()
    assert TRIGGER in region(page, "project")
    html = assert_only_the_fragment(signed_in(alice).get(url, **HTMX), "project")

    assert "Fix the tap" in html and "Paint the door" in html and ">Home</h1>" in html
    assert f'hx-get="{url}"' in region(html, "project")


def test_a_project_that_went_away_says_so_in_its_region_and_reveals_nothing(alice: Any, bob: Any) -> None:
    bobs = Project.objects.create(owner=bob, name="Bob's secret")
    gone = Project.objects.create(owner=alice, name="Home")
    gone_url = f"/tracker/projects/{gone.pk}/"
    gone.delete()

    for url in [gone_url, f"/tracker/projects/{bobs.pk}/"]:
        html = assert_only_the_fragment(signed_in(alice).get(url, **HTMX), "project")
        assert "no longer exists" in html and "secret" not in html
        assert "hx-trigger" not in html  # nothing left to keep up with
        assert signed_in(alice).get(url).status_code == 404  # the page itself is still not found


def test_an_htmx_request_for_the_task_list_gets_the_region_with_its_status_and_page(alice: Any, bob: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    for number in range(55):
        Task.objects.create(project=home, title=f"Chore {number:02d}", status=Task.Status.DONE)
    Task.objects.create(project=home, title="Still open")
    Task.objects.create(project=Project.objects.create(owner=bob, name="Bob's"), title="Bob's chore",
                        status=Task.Status.DONE)

    page = signed_in(alice).get("/tracker/tasks/?status=done").content.decode()
    assert TRIGGER in region(page, "tasks")
    assert "?status=done&amp;page=2" in page  # the pages keep the filter
    html = assert_only_the_fragment(signed_in(alice).get("/tracker/tasks/?status=done&page=2", **HTMX), "tasks")

    assert html.count("Chore ") == 5 and "Still open" not in html and "Bob" not in html
    assert 'hx-get="/tracker/tasks/?status=done&amp;page=2"' in region(html, "tasks")


def test_a_task_page_past_the_end_shows_the_last_page_so_a_shrinking_list_still_refreshes(alice: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="The only one")

    html = assert_only_the_fragment(signed_in(alice).get("/tracker/tasks/?page=3", **HTMX), "tasks")

    assert "The only one" in html


def test_a_signed_out_region_sends_the_whole_page_to_log_in_rather_than_showing_the_form_in_the_region(
    client: Client,
) -> None:
    response = client.get("/tracker/tasks/?status=done", **HTMX)

    assert response["HX-Redirect"] == "/login/?next=/tracker/tasks/%3Fstatus%3Ddone"
    assert client.get("/tracker/").status_code == 302  # without htmx, the usual redirect


def test_the_home_page_projects_and_open_tasks_are_a_region_too(alice: Any, bob: Any) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    Task.objects.create(project=home, title="Fix the tap")
    Project.objects.create(owner=bob, name="Bob's secret")

    page = signed_in(alice).get("/").content.decode()
    assert TRIGGER in region(page, "home") and "Welcome, alice" in page
    html = assert_only_the_fragment(signed_in(alice).get("/", **HTMX), "home")

    assert "Home" in html and "Fix the tap" in html and "secret" not in html and "Welcome" not in html
