"""Files in the society: a file the person attached to a request reaches the member that does the work, at any
depth, as the data its asker was given (the files block after its task), and its tool calls may hand it to a view
as the person's own upload, exactly as a single assistant's would. Through the real socket or send, worker and
database: the site's demo society on the offline model imports the CSV through the clerk, and a scripted asker's
member reads the file and imports it; a file that is not the person's is no file for a member either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from tests.attachments.test_attachments_tools import uploaded
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CSV = b"title,priority,due_date\nBuy milk,high,2026-12-10\nFix the fence,,\n"


def _asked_the_demo_society(user: Any, text: str, attachment: int) -> AgentRun:
    """`text` sent with the file to the site's demo society, in a chat of its own; its top run once ended."""
    chat = AgentChat.objects.create(owner=user, spec="orchestrator")
    sent = chat_send(user=user, content=text, chat_id=chat.pk, attachments=[attachment])
    return wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)


def _the_trees_step(top: AgentRun, tool_name: str) -> AgentStep:
    """The one call of `tool_name` in the tree of `top`, by whichever run of it made it."""
    [step] = AgentStep.objects.filter(run__in=[top, *AgentRun.objects.filter(root=top)], tool_name=tool_name)
    return step


def test_the_demo_society_imports_an_attached_csv_through_the_clerk(alice: Any, celery_worker: WorkerProcess) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    csv = uploaded(alice, "tasks.csv", CSV)

    top = _asked_the_demo_society(alice, "make tasks from this CSV in Home", csv)

    assert top.status == "succeeded", top.error
    # The clerk did it, with the person's file: its step is the tracker's own import form's.
    imported = _the_trees_step(top, "tracker_tasks_import")
    assert imported.run.spec == "clerk" and imported.took_effect is True
    assert imported.arguments == {"pk": home.pk, "file": csv}
    assert sorted(Task.objects.filter(project=home).values_list("title", flat=True)) == ["Buy milk", "Fix the fence"]


def _user_text(body: dict[str, Any]) -> str:
    """The text of a request's messages of the person's role (a member's: its task and the files)."""
    parts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        parts.append(content if isinstance(content, str)
                     else "".join(part.get("text", "") for part in content if isinstance(part, dict)))
    return "\n".join(parts)


def test_a_member_asked_with_the_request_gets_its_files_and_hands_one_to_a_view(
    alice: Any, bob: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    csv = uploaded(alice, "tasks.csv", CSV)
    theirs = uploaded(bob, "theirs.csv", CSV)
    fake_openai.queue(
        # The asker hands the work over; its member reads the file it was given and imports it. Another person's
        # file is no file of this person's, at this depth as at the top.
        openai_stream([], [("a1", "ask_test-clerk", {"task": "Import the attached CSV into the project Home."})]),
        openai_stream([], [("c1", "tracker_tasks_import", {"pk": home.pk, "file": theirs})]),
        openai_stream([], [("c2", "tracker_tasks_import", {"pk": home.pk, "file": csv})]),
        openai_stream(["Imported 2 tasks into Home."]),
        openai_stream(["Your 2 tasks are in Home."]),
    )
    chat = AgentChat.objects.create(owner=alice, spec="test-asker")

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        sent = chat_send(user=alice, content="make tasks from this CSV in Home", chat_id=chat.pk, attachments=[csv])
    top = wait_for_run(sent.run.pk, *AgentRun.ENDED_STATUSES, timeout=60)

    assert top.status == "succeeded", top.error
    [member] = AgentRun.objects.filter(parent=top)
    assert member.spec == "test-clerk" and member.config["attachments"] == [csv]
    # The member's first request: its task, then the file as data, as its asker had it.
    asked = _user_text(fake_openai.bodies[1])
    assert asked.startswith("Import the attached CSV into the project Home.\n\n<attachments>")
    described = json.loads(asked.split("<attachments>")[1].split("</attachments>")[0].strip().splitlines()[-1])
    assert [(entry["id"], entry["name"]) for entry in described] == [(csv, "tasks.csv")]
    assert "Buy milk,high,2026-12-10" in asked
    stranger, imported = AgentStep.objects.filter(run=member, tool_name="tracker_tasks_import").order_by("seq")
    assert stranger.took_effect is False and "file" in stranger.result["data"]["errors"]
    assert imported.took_effect is True
    assert sorted(Task.objects.filter(project=home).values_list("title", flat=True)) == ["Buy milk", "Fix the fence"]


def test_the_demo_society_attaches_a_file_to_the_task_it_names(alice: Any, celery_worker: WorkerProcess) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    fence = Task.objects.create(project=home, title="Fix the fence")
    quote = uploaded(alice, "quote.csv", b"item,price\nposts,80\n")

    top = _asked_the_demo_society(alice, "attach this to “Fix the fence”", quote)

    assert top.status == "succeeded", top.error
    attached = _the_trees_step(top, "tracker_task_attach")
    assert attached.run.spec == "clerk" and attached.took_effect is True
    assert attached.arguments == {"pk": fence.pk, "file": quote}
    assert list(fence.files.values_list("name", flat=True)) == ["quote.csv"]
    # The step shows the task's card; the reply says what was done.
    assert "Fix the fence" in attached.card and "quote.csv" in top.reply
