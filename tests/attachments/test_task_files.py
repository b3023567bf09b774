"""Files on the tracker's tasks: a form with a file field on the task's page, and the same view as the assistant's
tool `tracker_task_attach`, which takes a file the person attached to a message. Through the real executor and the
site's middleware: the person's own file lands on a task they can see; another person's file, or a task they
cannot see, changes nothing. A task's files are served only to those who may see the task, never as a page of the
site, and go with the task."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client
from django.urls import reverse

from assistant.attachments.store import attachment_store
from assistant.tools import execute_tool
from tracker.models import Project, Task, TaskFile

pytestmark = pytest.mark.django_db(transaction=True)


def _attachment(user: Any, name: str = "quote.txt", body: bytes = b"Fence: 120 EUR") -> int:
    return attachment_store(user=user, upload=SimpleUploadedFile(name, body, content_type="text/plain")).pk


@pytest.fixture
def fence(alice: Any, bob: Any) -> Task:
    home = Project.objects.create(owner=alice, name="Home")
    home.members.add(bob)
    return Task.objects.create(project=home, title="Fix the fence")


def test_the_tool_keeps_the_persons_own_file_with_a_task_they_can_see(alice: Any, bob: Any, fence: Task) -> None:
    mine, theirs = _attachment(alice), _attachment(bob, "bobs.txt")
    hidden = Task.objects.create(project=Project.objects.create(owner=bob, name="Private"), title="Secret")

    stranger = execute_tool(alice, "tracker_task_attach", {"pk": fence.pk, "file": theirs})
    unseen = execute_tool(alice, "tracker_task_attach", {"pk": hidden.pk, "file": mine})
    done = execute_tool(alice, "tracker_task_attach", {"pk": fence.pk, "file": mine})

    assert stranger.status == "invalid" and "file" in stranger.data["errors"] and not stranger.took_effect
    assert unseen.status == "not_found" and not unseen.took_effect
    assert done.status == "done" and done.took_effect
    assert done.data["messages"][0]["text"] == "“quote.txt” attached to the task “Fix the fence”."
    [kept] = TaskFile.objects.all()
    assert (kept.task, kept.name, kept.size, kept.uploaded_by) == (fence, "quote.txt", 14, alice)


def test_the_tasks_page_lists_its_files_and_takes_one_with_a_clear_refusal_when_too_big(
        alice: Any, fence: Task, settings: Any) -> None:
    client = Client()
    client.force_login(alice)
    page = reverse("tracker:task_detail", args=[fence.pk])
    assert "No files yet." in client.get(page).content.decode()

    added = client.post(reverse("tracker:task_attach", args=[fence.pk]),
                        {"file": SimpleUploadedFile("plan.pdf", b"%PDF-1.4 plan", content_type="application/pdf")})
    too_big = client.post(reverse("tracker:task_attach", args=[fence.pk]),
                          {"file": SimpleUploadedFile("huge.bin", b"x" * (10 * 1024 * 1024 + 1))})

    assert added.status_code == 302
    shown = client.get(page).content.decode()
    [kept] = fence.files.all()
    assert f'<a href="/tracker/tasks/{fence.pk}/files/{kept.pk}/">plan.pdf</a>' in shown and "13\xa0bytes" in shown
    assert too_big.status_code == 200 and "a task takes files of up to 10 MB" in too_big.content.decode()
    assert fence.files.count() == 1


def test_a_tasks_file_is_served_only_to_those_who_see_the_task_and_never_as_a_page(
        alice: Any, bob: Any, fence: Task, user_factory: Any) -> None:
    execute_tool(alice, "tracker_task_attach", {"pk": fence.pk, "file": _attachment(alice, "x.html", b"<script>")})
    [kept] = fence.files.all()
    url = reverse("tracker:task_file", args=[fence.pk, kept.pk])

    def fetched(user: Any) -> Any:
        client = Client()
        client.force_login(user)
        return client.get(url)

    member, stranger = fetched(bob), fetched(user_factory("carol"))
    assert member.status_code == 200 and b"".join(member.streaming_content) == b"<script>"
    assert member["Content-Disposition"].startswith("attachment;")
    assert member["Content-Type"] == "application/octet-stream"
    assert member["X-Content-Type-Options"] == "nosniff" and "sandbox" in member["Content-Security-Policy"]
    assert stranger.status_code == 404
    # Another task's id with this file's is no address of it.
    other = Task.objects.create(project=fence.project, title="Other")
    client = Client()
    client.force_login(alice)
    assert client.get(reverse("tracker:task_file", args=[other.pk, kept.pk])).status_code == 404


def test_a_tasks_files_go_with_it(alice: Any, fence: Task) -> None:
    execute_tool(alice, "tracker_task_attach", {"pk": fence.pk, "file": _attachment(alice)})
    [kept] = fence.files.all()
    storage, name = kept.file.storage, kept.file.name
    assert storage.exists(name)

    with transaction.atomic():
        fence.delete()
    assert not TaskFile.objects.exists() and not storage.exists(name)
