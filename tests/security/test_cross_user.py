"""The cross-user matrix (issue 9): every client event and every kind of tool, given another person's
ids, answers exactly as for ids that do not exist, and changes no row anywhere.

Everything goes through the real parts: the websocket consumer, the worker running the run, the
executor firing the tracker's own views. Bob owns the rows; Alice is the attacker, signed in as
herself, with a scripted model that names Bob's ids, then ids that exist for nobody.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from assistant.conversation.services import chat_send
from assistant.models import AgentStep
from assistant.testing.sockets import settle
from config.asgi import application
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tests.tables import models_of, table_rows
from tracker.models import Comment, Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
SNAPSHOT_APPS = {"assistant", "registry", "tracker", "testapp"}
# Far above any id the test creates, so that it exists for nobody and appears in no answer by chance.
MISSING = 900_000_000


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table the assistant or a tool could touch (many-to-many tables included)."""
    return table_rows(models_of(*SNAPSHOT_APPS))


def connect(user: Any) -> Any:
    from channels.testing import WebsocketCommunicator

    client = Client()
    client.force_login(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    return WebsocketCommunicator(application, "/ws/assistant/", headers=[ORIGIN, cookie])


# --- client events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunIds:
    chat: int
    run: int
    step: int


EVENTS = [
    pytest.param(lambda ids: {"type": "assistant.send", "content": "Delete it.", "chat_id": ids.chat},
                 id="send-into-their-chat"),
    pytest.param(lambda ids: {"type": "assistant.load", "chat_id": ids.chat}, id="load-their-chat"),
    pytest.param(lambda ids: {"type": "assistant.load", "chat_id": ids.chat, "steps": True, "limit": 200},
                 id="load-their-chat-with-steps"),
    pytest.param(lambda ids: {"type": "assistant.chats", "before": ids.chat}, id="list-chats-before-their-chat"),
    pytest.param(lambda ids: {"type": "assistant.chat_rename", "chat_id": ids.chat, "title": "Mine now"},
                 id="rename-their-chat"),
    pytest.param(lambda ids: {"type": "assistant.chat_delete", "chat_id": ids.chat}, id="delete-their-chat"),
    pytest.param(lambda ids: {"type": "assistant.cancel", "run_id": ids.run}, id="cancel-their-run"),
    pytest.param(lambda ids: {"type": "assistant.confirm", "run_id": ids.run, "step_id": ids.step, "approve": True},
                 id="approve-their-pending-step"),
    pytest.param(lambda ids: {"type": "assistant.confirm", "run_id": ids.run, "step_id": ids.step, "approve": False},
                 id="decline-their-pending-step"),
]


def _with_ids_hidden(answer: dict[str, Any], ids: RunIds) -> str:
    """The answer with the ids that were sent replaced by a mark: an error may echo the id it was given."""
    text = json.dumps(answer, sort_keys=True)
    for value in {ids.chat, ids.run, ids.step}:
        text = re.sub(rf"(?<!\d){value}(?!\d)", "<id>", text)
    return text


@pytest.mark.parametrize("event", EVENTS)
def test_an_event_naming_another_persons_chat_or_run_answers_as_for_a_missing_one(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str],
    event: Callable[[RunIds], dict[str, Any]],
) -> None:
    secret = Project.objects.create(owner=bob, name="Bob's secret")
    model = script({"tool_calls": [{"name": "tracker_project_delete", "arguments": {"pk": secret.pk}}]},
                   {"text": "Deleted."})
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=bob, content="Delete my secret project.").run
    wait_for_run(run.pk, "awaiting_confirmation")
    pending = AgentStep.objects.get(run=run, state=AgentStep.State.AWAITING_CONFIRMATION)
    theirs = RunIds(chat=run.chat_id, run=run.pk, step=pending.pk)
    missing = RunIds(chat=MISSING + 1, run=MISSING + 2, step=MISSING + 3)
    before = snapshot()

    attacker, owner = connect(alice), connect(bob)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        assert (await attacker.connect())[0] and (await owner.connect())[0]
        await attacker.send_json_to({**event(theirs), "request_id": "probe"})
        against_theirs = await attacker.receive_json_from(timeout=5)
        await attacker.send_json_to({**event(missing), "request_id": "probe"})
        against_missing = await attacker.receive_json_from(timeout=5)
        # Nothing else follows for either person: no run started, no step answered, no event leaked.
        assert await settle((attacker, alice), (owner, bob)) == [[], []]
        await attacker.disconnect()
        await owner.disconnect()
        return against_theirs, against_missing

    against_theirs, against_missing = asyncio.run(scenario())

    assert against_theirs["type"] in {"assistant.error", "assistant.thread_failed"}
    assert against_theirs.get("code", "not_found") == "not_found"
    assert _with_ids_hidden(against_theirs, theirs) == _with_ids_hidden(against_missing, missing)
    assert snapshot() == before
    # Bob's question still waits for Bob.
    wait_for_run(run.pk, "awaiting_confirmation", timeout=0)


# --- tools ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordIds:
    project: int
    project_name: str
    task: int


Call = tuple[str, Callable[[RecordIds], dict[str, Any]]]

TOOL_KINDS = [
    pytest.param([("tracker_task_list", lambda ids: {"project": ids.project}),
                  ("tracker_comment_list", lambda ids: {"task": ids.task})], id="read-tool"),
    pytest.param([("tracker_task_detail", lambda ids: {"pk": ids.task}),
                  ("tracker_project_stats", lambda ids: {"pk": ids.project})], id="read-view"),
    pytest.param([("tracker_project_update", lambda ids: {"pk": ids.project, "name": "Taken"}),
                  ("tracker_task_update", lambda ids: {"pk": ids.task, "title": "Taken", "status": "done"})],
                 id="update-view"),
    pytest.param([("tracker_project_delete", lambda ids: {"pk": ids.project}),
                  ("tracker_task_delete", lambda ids: {"pk": ids.task})], id="delete-view"),
    pytest.param([("tracker_task_create", lambda ids: {"project": ids.project, "title": "Planted"}),
                  ("tracker_task_create", lambda ids: {"project": ids.project_name, "title": "Planted"}),
                  ("tracker_comment_create", lambda ids: {"pk": ids.task, "body": "Planted"})],
                 id="create-in-their-project"),
    pytest.param([("tracker_project_archive", lambda ids: {"pk": ids.project, "archived": True}),
                  ("tracker_task_complete", lambda ids: {"pk": ids.task})], id="function-view"),
]


async def _converse(socket: Any, content: str, timeout: float = 30) -> dict[str, Any]:
    """Send a message and approve whatever the run asks, until it ends; returns the last event."""
    await socket.send_json_to({"type": "assistant.send", "content": content})
    deadline = time.monotonic() + timeout
    while True:
        event = await socket.receive_json_from(timeout=max(0.1, deadline - time.monotonic()))
        if event["type"] == "assistant.confirm":
            await socket.send_json_to({"type": "assistant.confirm", "run_id": event["run_id"],
                                       "step_id": event["step"]["id"], "approve": True})
        elif event["type"] in {"assistant.replied", "assistant.reply_failed", "assistant.cancelled"}:
            return event


@pytest.mark.parametrize("calls", TOOL_KINDS)
def test_a_tool_given_another_persons_ids_answers_as_for_missing_ones_and_changes_nothing(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str], calls: list[Call],
) -> None:
    Project.objects.create(owner=alice, name="Home")  # Alice has projects of her own to choose from
    secret = Project.objects.create(owner=bob, name="Bob's secret")
    plan = Task.objects.create(project=secret, title="Bob's plan", created_by=bob)
    Comment.objects.create(task=plan, author=bob, body="Only for Bob.")
    theirs = RecordIds(project=secret.pk, project_name=secret.name, task=plan.pk)
    missing = RecordIds(project=MISSING + 1, project_name="No such project", task=MISSING + 2)
    # Each model call names Bob's record, then one that exists for nobody, with the same tool.
    model = script(
        *({"tool_calls": [{"name": name, "arguments": arguments(theirs)},
                          {"name": name, "arguments": arguments(missing)}]} for name, arguments in calls),
        {"text": "Tried."},
    )
    before = snapshot()

    socket = connect(alice)

    async def scenario() -> dict[str, Any]:
        assert (await socket.connect())[0]
        last = await _converse(socket, "Do it to Bob's things.")
        await socket.disconnect()
        return last

    with assistant_settings_with(MODEL=model):
        last = asyncio.run(scenario())

    assert last["type"] == "assistant.replied", last
    steps = list(AgentStep.objects.filter(run_id=last["run_id"], kind=AgentStep.Kind.TOOL_CALL).order_by("seq"))
    assert [step.tool_name for step in steps] == [name for name, _ in calls for _ in range(2)]
    for against_theirs, against_missing in zip(steps[::2], steps[1::2], strict=True):
        assert against_theirs.result["status"] in {"not_found", "invalid", "data"}, against_theirs.result
        assert against_theirs.took_effect is False
        assert against_theirs.result == against_missing.result, against_theirs.tool_name
    # Alice's run wrote its own steps and messages; no row of anyone's tracker data changed.
    after = snapshot()
    assert {label: rows for label, rows in after.items() if not label.startswith(("assistant.", "registry."))} == \
        {label: rows for label, rows in before.items() if not label.startswith(("assistant.", "registry."))}
