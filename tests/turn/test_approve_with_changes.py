"""Approve with changes, through the real socket, worker and database: the person corrects a value on the card
and approves; the view receives their value, the step keeps what the model asked for beside what ran, and the model
is told what was changed. A value that does not fit is refused with its field's error and nothing runs; changes sent
with a denial, in the wrong shape, for another person's run or for a card already answered change nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from assistant.models import AgentRun, AgentStep
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_an_action_approved_with_changes_runs_with_the_persons_values_and_the_model_is_told(
    alice: Any, bob: Any, user_factory: Callable[..., Any], celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    fake_openai.queue(
        openai_stream([], [("c1", "test_task_change", {"pk": task.pk, "title": "Buy mlk"})]),
        openai_stream(["Renamed it to “Buy milk”."]),
    )
    tab, strangers_tab = connect(alice), connect(bob)

    async def answer(socket: Any, frame: dict[str, Any]) -> dict[str, Any]:
        await socket.send_json_to({"type": "assistant.confirm", "request_id": "r", **frame})
        return (await receive_until(socket, lambda event: event["type"] == "assistant.error", timeout=10))[-1]

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, dict[str, Any]]]:
        assert (await tab.connect())[0] and (await strangers_tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "rename the tap task to Buy milk"})
        asked = (await receive_until(tab, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        card = {"run_id": asked["run_id"], "step_id": asked["step"]["id"]}
        refused = {
            "a value that does not fit": await answer(tab, {**card, "approve": True,
                                                            "arguments": {"pk": task.pk, "title": ["Buy", "milk"]}}),
            # The schema allows any person's id; the view's own form allows only the project's people.
            "a value the view's form refuses": await answer(tab, {**card, "approve": True, "arguments": {
                "pk": task.pk, "title": "Buy milk", "assignee": bob.pk}}),
            "changes with a denial": await answer(tab, {**card, "approve": False,
                                                        "arguments": {"pk": task.pk, "title": "Buy milk"}}),
            "changes that are not an object": await answer(tab, {**card, "approve": True, "arguments": ["Buy milk"]}),
            "another person's card": await answer(strangers_tab, {**card, "approve": True,
                                                                   "arguments": {"pk": task.pk, "title": "Mine"}}),
        }
        # Nothing of those ran, and the card still waits, with the model's values on it.
        waiting = AgentStep.objects.filter(pk=asked["step"]["id"])
        assert await database_sync_to_async(lambda: (
            Task.objects.get(pk=task.pk).title, *waiting.values_list("state", "arguments", "asked_arguments").get(),
        ))() == ("Fix the tap", "awaiting_confirmation", {"pk": task.pk, "title": "Buy mlk"}, None)

        await tab.send_json_to({"type": "assistant.confirm", **card, "approve": True,
                                "arguments": {"pk": task.pk, "title": "Buy milk"}})
        events = await receive_until(tab, lambda event: event["type"] == "assistant.replied", timeout=30)
        refused["a card already answered"] = await answer(tab, {**card, "approve": True,
                                                                "arguments": {"pk": task.pk, "title": "Again"}})
        await tab.disconnect()
        await strangers_tab.disconnect()
        return asked, events, refused

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        asked, events, refused = asyncio.run(scenario())

    assert {what: error["code"] for what, error in refused.items()} == {
        "a value that does not fit": "invalid_arguments", "a value the view's form refuses": "invalid_arguments",
        "changes with a denial": "bad_request",
        "changes that are not an object": "bad_request", "another person's card": "not_found",
        "a card already answered": "stale_confirmation"}
    assert set(refused["a value that does not fit"]["fields"]) == {"title"}
    assert refused["a value the view's form refuses"]["fields"] == {
        "assignee": "Select a valid choice. That choice is not one of the available choices."}
    # What the person approved is what the view received, and the step keeps both.
    assert Task.objects.get(pk=task.pk).title == "Buy milk"
    step = AgentStep.objects.get(pk=asked["step"]["id"])
    assert (step.arguments, step.asked_arguments, step.confirmation, step.took_effect) == (
        {"pk": task.pk, "title": "Buy milk"}, {"pk": task.pk, "title": "Buy mlk"}, "approved", True)
    assert "Buy milk" in step.summary and "mlk" not in step.summary
    shown = [event["step"] for event in events if event["type"] == "assistant.step"
             and event["step"]["id"] == step.pk and event["step"]["state"] == "finished"]
    assert shown and shown[-1]["asked_arguments"] == {"pk": task.pk, "title": "Buy mlk"}
    # The model was told what ran instead of what it asked for.
    [told] = [json.loads(message["content"]) for message in fake_openai.bodies[1]["messages"]
              if message["role"] == "tool"]
    assert told["changed_by_person"] == {"title": {"asked": "Buy mlk", "approved": "Buy milk"}}
    run = AgentRun.objects.get(pk=asked["run_id"])
    assert (run.status, run.reply) == ("succeeded", "Renamed it to “Buy milk”.")
    # Staff see both on the run's timeline: what ran, what the model asked for, and that the person changed it.
    staff = Client()
    staff.force_login(user_factory("reviewer", is_staff=True, is_superuser=True))
    page = unescape(staff.get(reverse("admin:assistant_agentrun_change", args=[run.pk])).content.decode())
    row = page[page.index('id="step-2"'):]
    row = row[:row.index("</tr>")]
    assert "approved with changes by the person" in row
    assert '"title": "Buy milk"' in row and "the model asked for" in row and '"title": "Buy mlk"' in row


def test_two_tabs_approving_different_values_at_once_run_one_of_them_once(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    task = Task.objects.create(project=Project.objects.create(owner=alice, name="Home"), title="Fix the tap")
    fake_openai.queue(
        openai_stream([], [("c1", "test_task_change", {"pk": task.pk, "title": "Buy mlk"})]),
        openai_stream(["Renamed."]),
    )
    first, second = connect(alice), connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await first.connect())[0] and (await second.connect())[0]
        await first.send_json_to({"type": "assistant.send", "content": "rename the tap task"})
        asked = (await receive_until(first, lambda event: event["type"] == "assistant.confirm", timeout=30))[-1]
        await receive_until(second, lambda event: event["type"] == "assistant.confirm", timeout=30)
        card = {"type": "assistant.confirm", "run_id": asked["run_id"], "step_id": asked["step"]["id"],
                "approve": True}
        # Both tabs answer the same card at the same moment, each with its own correction.
        await asyncio.gather(
            first.send_json_to({**card, "arguments": {"pk": task.pk, "title": "Buy milk"}, "request_id": "one"}),
            second.send_json_to({**card, "arguments": {"pk": task.pk, "title": "Buy oat milk"}, "request_id": "two"}))
        answers = [*await receive_until(first, lambda event: event["type"] == "assistant.replied"
                                        or event.get("request_id") == "one" and event["type"] == "assistant.error",
                                        timeout=30),
                   *await receive_until(second, lambda event: event["type"] == "assistant.replied"
                                        or event.get("request_id") == "two" and event["type"] == "assistant.error",
                                        timeout=30)]
        await first.disconnect()
        await second.disconnect()
        return answers

    with assistant_settings_with(MODEL="openai:fake-gpt"):
        answers = asyncio.run(scenario())

    # One answer won; the other was refused as stale and changed nothing.
    refused = [event for event in answers if event["type"] == "assistant.error"]
    assert [event["code"] for event in refused] == ["stale_confirmation"]
    step = AgentStep.objects.get(tool_name="test_task_change")
    won = "Buy oat milk" if refused[0]["request_id"] == "one" else "Buy milk"
    assert (step.arguments["title"], step.asked_arguments["title"]) == (won, "Buy mlk")
    assert Task.objects.get(pk=task.pk).title == won
    assert AgentStep.objects.filter(tool_name="test_task_change", took_effect=True).count() == 1
