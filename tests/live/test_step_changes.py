"""What a step changed: a tool step that took effect names the models it wrote (`changes`), from the tool's
declaration, so a page can refresh what it shows of them; reads, model calls and steps that did nothing
name none. Through the real socket, worker and tracker views; only the model is scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from assistant.live.payloads import step_payload
from assistant.models import AgentStep
from assistant.testing.sockets import connect, receive_until
from tests.conftest import WorkerProcess, assistant_settings_with
from tracker.models import Project, Task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_created_task_is_named_as_a_change_and_reads_are_not(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    home = Project.objects.create(owner=alice, name="Home")
    model = script(
        {"tool_calls": [{"name": "tracker_task_list", "arguments": {}}]},
        {"tool_calls": [{"name": "tracker_task_create", "arguments": {"project": home.pk, "title": "Buy milk"}},
                        {"name": "tracker_task_create", "arguments": {"project": home.pk, "title": ""}}]},
        {"text": "Added."},
    )
    tab = connect(alice)

    async def scenario() -> list[dict[str, Any]]:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "add Buy milk to Home"})
        events = await receive_until(tab, lambda e: e["type"] in {"assistant.replied", "assistant.reply_failed"})
        await tab.disconnect()
        assert events[-1]["type"] == "assistant.replied", events[-1]
        return [event["step"] for event in events if event["type"] == "assistant.step"]

    with assistant_settings_with(MODEL=model):
        steps = asyncio.run(scenario())

    final = {step["seq"]: step for step in steps}  # the last event of each step
    by_tool = [(s["tool_name"] or s["kind"], s["took_effect"], s["changes"]) for s in final.values()]
    assert by_tool == [
        ("model_call", None, []),
        ("tracker_task_list", False, []),
        ("model_call", None, []),
        ("tracker_task_create", True, ["tracker.task"]),
        ("tracker_task_create", False, []),  # an empty title: the form refused it, nothing changed
        ("model_call", None, []),
    ]
    # A step announced as started has changed nothing yet.
    assert all(s["changes"] == [] for s in steps if s["state"] == "started")
    assert Task.objects.filter(project=home, title="Buy milk").exists()
    # A reload (the same payload from the stored row) says the same.
    created = AgentStep.objects.get(run_id=steps[0]["run_id"], seq=4)
    assert step_payload(created)["changes"] == ["tracker.task"]
