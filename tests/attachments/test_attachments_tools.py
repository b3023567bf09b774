"""A file the person attached, handed to a tool whose view's form has a file field: through the real socket, worker
and the site's middleware, the tracker's own import form receives it in request.FILES, as if the person had uploaded
it on the project's page. The form's own checks refuse a bad row (nothing is made), and a file that is not the
person's is no file at all."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from assistant.models import AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CSV = b"title,priority,due_date\nBuy milk,high,2026-12-10\nFix the fence,,\n"
BAD = b"title,priority\nBuy milk,urgent\n"


def uploaded(user: Any, name: str, body: bytes) -> int:
    client = Client()
    client.force_login(user)
    answer = client.post(reverse("assistant:attachments"),
                         {"file": SimpleUploadedFile(name, body, content_type="text/csv")})
    assert answer.status_code == 201, answer.content
    return int(answer.json()["attachment"]["id"])


def test_a_csv_becomes_tasks_through_the_trackers_own_form_and_a_bad_one_or_anothers_makes_none(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    good, bad = uploaded(alice, "tasks.csv", CSV), uploaded(alice, "bad.csv", BAD)
    theirs = uploaded(bob, "theirs.csv", CSV)
    fake_openai.queue(
        openai_stream([], [("c1", "tracker_tasks_import", {"pk": home.pk, "file": bad})]),
        openai_stream([], [("c2", "tracker_tasks_import", {"pk": home.pk, "file": theirs})]),
        openai_stream([], [("c3", "tracker_tasks_import", {"pk": home.pk, "file": good})]),
        openai_stream(["Added 2 tasks to Home."]),
    )
    tab = connect(alice)

    async def scenario() -> None:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "make tasks from this CSV in Home",
                                "attachments": [good, bad]})
        await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"}, timeout=30)
        await tab.disconnect()

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        asyncio.run(scenario())

    refused, stranger, done = AgentStep.objects.filter(tool_name="tracker_tasks_import").order_by("seq")
    # The form's own check: the bad row is named, and nothing was made.
    assert refused.took_effect is False and refused.result["status"] == "invalid"
    assert "row 2: priority “urgent” is not low, normal or high" in str(refused.result["data"]["errors"]["file"])
    # Another person's file is no file of this person's: never read, nothing made.
    assert stranger.took_effect is False and "file" in stranger.result["data"]["errors"]
    # The good one went through the tracker's view as an upload, and its tasks are the project's.
    assert done.took_effect is True
    assert done.result["data"]["messages"][0]["text"] == "2 tasks added to Home from tasks.csv."
    assert list(Task.objects.filter(project=home).order_by("id").values_list("title", "priority", "created_by")) == [
        ("Buy milk", Task.Priority.HIGH, alice.pk), ("Fix the fence", Task.Priority.NORMAL, alice.pk)]
