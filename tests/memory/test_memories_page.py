"""The memories page: a person sees, searches and deletes what the assistant remembers of them, and
nothing of anyone else's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client, override_settings
from django.urls import reverse

from assistant.models import AgentMemory

pytestmark = pytest.mark.django_db

LIST_URL = "/assistant/memories/"
CLEAR_URL = "/assistant/memories/clear/"


def remember(owner: Any, content: str, spec: str = "default") -> AgentMemory:
    return AgentMemory.objects.create(owner=owner, spec=spec, content=content, embedding=[0.1, 0.2, 0.3], embedder="t")


def signed_in(user: Any, *, enforce_csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


def shown(response: Any) -> list[str]:
    """The memories' contents as the page lists them, top to bottom."""
    return re.findall(r'<p class="assistant-memory-content">(.*?)</p>', response.content.decode(), re.S)


def flashed(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def assistant_without_layout() -> Iterator[None]:
    from django.conf import settings

    plain = {key: value for key, value in settings.ASSISTANT.items() if key != "PAGE_LAYOUT"}
    with override_settings(ASSISTANT=plain):
        yield


def test_the_url_is_named_and_an_anonymous_visitor_is_sent_to_log_in(client: Client) -> None:
    assert reverse("assistant:memories") == LIST_URL
    for method, url in [("get", LIST_URL), ("get", CLEAR_URL), ("post", CLEAR_URL), ("post", LIST_URL + "1/delete/")]:
        response = getattr(client, method)(url)
        assert response.status_code == 302, (method, url)
        assert response["Location"].startswith("/login/?next=")


def test_a_person_sees_only_their_own_memories_newest_first(alice: Any, bob: Any) -> None:
    remember(alice, "prefers tea")
    remember(bob, "bob's secret plan", spec="other")
    remember(alice, "works on Home", spec="planner")

    response = signed_in(alice).get(LIST_URL)

    assert response.status_code == 200
    assert shown(response) == ["works on Home", "prefers tea"]
    page = response.content.decode()
    assert "secret plan" not in page
    assert "planner" in page and "<time" in page  # each memory shows its spec and when it was made
    assert "<h1" in page and 'for="assistant-memories-q"' in page  # headed, and the search box is labelled


def test_a_person_with_no_memories_is_told_so(alice: Any, bob: Any) -> None:
    remember(bob, "bob only")

    response = signed_in(alice).get(LIST_URL)

    assert shown(response) == []
    assert "remembers nothing" in response.content.decode()


def test_search_is_case_insensitive_and_finds_only_the_persons_own(alice: Any, bob: Any) -> None:
    remember(alice, "Likes GREEN tea")
    remember(alice, "walks the dog")
    remember(bob, "green is bob's colour")

    response = signed_in(alice).get(LIST_URL, {"q": "green"})

    assert shown(response) == ["Likes GREEN tea"]
    assert 'value="green"' in response.content.decode()  # the box keeps what was searched
    nothing = signed_in(alice).get(LIST_URL, {"q": "purple"})
    assert shown(nothing) == [] and "No memory contains" in nothing.content.decode()


def test_the_list_is_paginated_and_the_pages_keep_the_search(alice: Any) -> None:
    for number in range(30):
        remember(alice, f"note {number:02d}")
    remember(alice, "unrelated")

    first = signed_in(alice).get(LIST_URL, {"q": "note"})
    second = signed_in(alice).get(LIST_URL, {"q": "note", "page": 2})

    assert shown(first) == [f"note {n:02d}" for n in range(29, 4, -1)]
    assert shown(second) == [f"note {n:02d}" for n in range(4, -1, -1)]
    assert "?q=note&amp;page=2" in first.content.decode()
    # A page past the end shows the last one rather than an error.
    assert shown(signed_in(alice).get(LIST_URL, {"q": "note", "page": 99})) == shown(second)


def test_deleting_one_memory_removes_it_says_so_and_returns_to_the_same_search(alice: Any) -> None:
    tea = remember(alice, "prefers tea")
    dog = remember(alice, "walks the dog")

    response = signed_in(alice).post(f"{LIST_URL}{tea.pk}/delete/", {"q": "tea", "page": "1"})

    assert response.status_code == 302 and response["Location"] == f"{LIST_URL}?q=tea&page=1"
    assert list(AgentMemory.objects.values_list("pk", flat=True)) == [dog.pk]
    assert flashed(response) == ["Deleted the memory “prefers tea”."]


def test_deleting_another_persons_memory_is_not_found_and_deletes_nothing(alice: Any, bob: Any) -> None:
    bobs = remember(bob, "bob's note")

    response = signed_in(alice).post(f"{LIST_URL}{bobs.pk}/delete/")

    assert response.status_code == 404
    assert AgentMemory.objects.filter(pk=bobs.pk).exists()
    assert signed_in(alice).post(f"{LIST_URL}900000000/delete/").status_code == 404


def test_delete_is_a_post(alice: Any) -> None:
    tea = remember(alice, "prefers tea")

    assert signed_in(alice).get(f"{LIST_URL}{tea.pk}/delete/").status_code == 405
    assert signed_in(alice).get(CLEAR_URL).status_code == 200  # the confirmation, which deletes nothing
    assert AgentMemory.objects.filter(pk=tea.pk).exists()


def test_delete_all_asks_first_then_deletes_only_the_persons_own(alice: Any, bob: Any) -> None:
    remember(alice, "one")
    remember(alice, "two")
    kept = remember(bob, "bob's")
    as_alice = signed_in(alice)

    listing = as_alice.get(LIST_URL).content.decode()
    assert f'href="{CLEAR_URL}"' in listing  # delete-all leads to the confirmation, not straight to a delete
    confirmation = as_alice.get(CLEAR_URL)
    assert "Delete all 2 memories?" in confirmation.content.decode()
    assert f'action="{CLEAR_URL}"' in confirmation.content.decode()
    assert AgentMemory.objects.count() == 3

    response = as_alice.post(CLEAR_URL)

    assert response.status_code == 302 and response["Location"] == LIST_URL
    assert list(AgentMemory.objects.values_list("pk", flat=True)) == [kept.pk]
    assert flashed(response) == ["Deleted all 2 memories."]


def test_deleting_needs_the_csrf_token(alice: Any) -> None:
    tea = remember(alice, "prefers tea")
    client = signed_in(alice, enforce_csrf_checks=True)

    assert client.post(f"{LIST_URL}{tea.pk}/delete/").status_code == 403
    assert client.post(CLEAR_URL).status_code == 403
    assert AgentMemory.objects.filter(pk=tea.pk).exists()

    # With the token the page's own form carries, the same request works.
    page = client.get(LIST_URL).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post(f"{LIST_URL}{tea.pk}/delete/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert not AgentMemory.objects.exists()


def test_memory_content_is_escaped(alice: Any) -> None:
    remember(alice, '<img src=x onerror="alert(1)">')

    page = signed_in(alice).get(LIST_URL).content.decode()

    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_this_site_shows_the_memories_page_in_its_own_layout(alice: Any) -> None:
    page = signed_in(alice).get(LIST_URL).content.decode()

    assert 'class="site-header"' in page
    assert '"/static/assistant/memories.css"' in page


@pytest.mark.usefixtures("assistant_without_layout")
def test_without_a_layout_the_memories_page_stands_alone_and_shows_its_messages(alice: Any) -> None:
    tea = remember(alice, "prefers tea")
    client = signed_in(alice)

    page = client.get(LIST_URL).content.decode()
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert 'class="site-header"' not in page and '"/static/assistant/assistant.css"' in page

    after = client.post(f"{LIST_URL}{tea.pk}/delete/", follow=True).content.decode()
    assert "Deleted the memory “prefers tea”." in after
