"""An approval is bound to the action the person saw: a confirm names the step it answers. Through the real
socket, the real worker and the real database; only the model is replaced (a script)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from assistant.models import AgentRun, AgentStep
from assistant.services import chat_send
from config.asgi import application
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for_run
from tracker.models import Project

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
DELETE = "tracker_project_delete"


def connect(user: Any) -> WebsocketCommunicator:
    """A browser tab signed in as `user`."""
    client = Client()
    client.force_login(user)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    return WebsocketCommunicator(application, "/ws/assistant/", headers=[ORIGIN, cookie])


async def receive_until(tab: WebsocketCommunicator, *wanted: str, timeout: float = 20) -> list[dict[str, Any]]:
    """Events up to and including the first whose type is one of `wanted`."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        event = await tab.receive_json_from(timeout=max(0.1, deadline - time.monotonic()))
        events.append(event)
        if event["type"] in wanted:
            return events


def answer(asked: dict[str, Any], *, approve: bool, **extra: Any) -> dict[str, Any]:
    """What the panel sends when the person clicks Approve or Deny on the card of `asked`."""
    step = asked["step"]
    return {"type": "assistant.confirm", "run_id": step["run_id"], "step_id": step["id"], "approve": approve, **extra}


def exists(project: Project) -> bool:
    return Project.objects.filter(pk=project.pk).exists()


def tool_steps(run_id: int) -> list[AgentStep]:
    return list(AgentStep.objects.filter(run_id=run_id, kind="tool_call").order_by("seq"))


@pytest.fixture
def two_projects(alice: Any) -> tuple[Project, Project]:
    return Project.objects.create(owner=alice, name="A"), Project.objects.create(owner=alice, name="B")


# --- a confirm answers the step it names, and nothing else ------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_late_confirm_from_another_tab_does_not_approve_the_next_question(
    alice: Any, two_projects: tuple[Project, Project], celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    first, second = two_projects
    model = script(
        {"tool_calls": [{"name": DELETE, "arguments": {"pk": first.pk}},
                        {"name": DELETE, "arguments": {"pk": second.pk}}]},
        {"text": "Done."},
    )
    tab1, tab2 = connect(alice), connect(alice)

    async def scenario() -> None:
        assert (await tab1.connect())[0] and (await tab2.connect())[0]
        await tab1.send_json_to({"type": "assistant.send", "content": "delete A and B"})
        shown_in_tab1 = (await receive_until(tab1, "assistant.confirm"))[-1]
        shown_in_tab2 = (await receive_until(tab2, "assistant.confirm"))[-1]
        assert shown_in_tab1["step"]["arguments"] == shown_in_tab2["step"]["arguments"] == {"pk": first.pk}

        await tab2.send_json_to(answer(shown_in_tab2, approve=True))
        next_question = (await receive_until(tab2, "assistant.confirm"))[-1]
        assert next_question["step"]["arguments"] == {"pk": second.pk}

        # Tab 1 showed the card for A; its click arrives after A was answered and B was asked.
        await receive_until(tab1, "assistant.confirm")
        await tab1.send_json_to(answer(shown_in_tab1, approve=True, request_id="late"))
        refused = (await receive_until(tab1, "assistant.error", "assistant.step"))[-1]
        assert (refused["type"], refused.get("code"), refused.get("request_id")) == (
            "assistant.error", "stale_confirmation", "late"
        ), refused
        assert await database_sync_to_async(exists)(second)
        pending = await database_sync_to_async(AgentStep.objects.get)(pk=next_question["step"]["id"])
        assert (pending.state, pending.confirmation) == ("awaiting_confirmation", "")

        await tab2.send_json_to(answer(next_question, approve=False))
        await receive_until(tab2, "assistant.replied")
        for tab in (tab1, tab2):
            await tab.disconnect()

    with assistant_settings_with(MODEL=model):
        asyncio.run(scenario())
    assert not exists(first) and exists(second)


def paused_run(user: Any, project: Project, model: str) -> tuple[AgentRun, AgentStep]:
    with assistant_settings_with(MODEL=model):
        run = chat_send(user=user, content=f"delete {project.name}", new_chat=True).run
    run = wait_for_run(run.pk, "awaiting_confirmation")
    return run, run.steps.get(state="awaiting_confirmation")


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_confirm_for_any_step_but_the_one_awaited_is_refused_and_changes_nothing(
    alice: Any, bob: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    mine, other_of_mine = Project.objects.create(owner=alice, name="A"), Project.objects.create(owner=alice, name="B")
    bobs = Project.objects.create(owner=bob, name="Bob's")

    def deleting(project: Project) -> str:
        return script({"tool_calls": [{"name": DELETE, "arguments": {"pk": project.pk}}]}, {"text": "Done."})

    run, step = paused_run(alice, mine, deleting(mine))
    other_run, other_step = paused_run(alice, other_of_mine, deleting(other_of_mine))
    bobs_run, bobs_step = paused_run(bob, bobs, deleting(bobs))
    model_step = run.steps.get(kind="model_call")
    missing = AgentStep.objects.order_by("-pk").first().pk + 1000

    def state() -> list[tuple[Any, ...]]:
        steps = AgentStep.objects.order_by("pk").values_list("pk", "state", "confirmation", "result")
        runs = AgentRun.objects.order_by("pk").values_list("pk", "status")
        return [*steps, *runs, *Project.objects.order_by("pk").values_list("pk", "name")]

    before = state()
    alices_tab, bobs_tab = connect(alice), connect(bob)
    cases: list[tuple[WebsocketCommunicator, dict[str, Any], str]] = [
        (alices_tab, {"run_id": run.pk, "step_id": other_step.pk}, "stale_confirmation"),  # another run's step
        (alices_tab, {"run_id": run.pk, "step_id": model_step.pk}, "stale_confirmation"),  # not a question
        (alices_tab, {"run_id": run.pk, "step_id": bobs_step.pk}, "not_found"),  # another person's step
        (alices_tab, {"run_id": bobs_run.pk, "step_id": bobs_step.pk}, "not_found"),  # another person's run
        (alices_tab, {"run_id": run.pk, "step_id": missing}, "not_found"),
        (alices_tab, {"run_id": run.pk}, "bad_request"),  # a confirm must say what it answers
        (alices_tab, {"run_id": run.pk, "step_id": "12x"}, "bad_request"),
        (bobs_tab, {"run_id": run.pk, "step_id": step.pk}, "not_found"),
        (bobs_tab, {"run_id": bobs_run.pk, "step_id": step.pk}, "not_found"),
    ]

    async def scenario() -> tuple[list[dict[str, Any]], list[bool]]:
        assert (await alices_tab.connect())[0] and (await bobs_tab.connect())[0]
        answers = []
        for number, (tab, fields, _code) in enumerate(cases):
            await tab.send_json_to({"type": "assistant.confirm", "approve": True, "request_id": number, **fields})
            answers.append((await receive_until(tab, "assistant.error", "assistant.step"))[-1])
        quiet = [await tab.receive_nothing(timeout=0.3) for tab in (alices_tab, bobs_tab)]
        for tab in (alices_tab, bobs_tab):
            await tab.disconnect()
        return answers, quiet

    answers, quiet = asyncio.run(scenario())
    assert [(a["type"], a.get("code"), a.get("request_id")) for a in answers] == [
        ("assistant.error", code, n) for n, (_t, _f, code) in enumerate(cases)
    ]
    assert quiet == [True, True]  # nothing was announced to anyone: nothing happened
    # Another person's step or run answers exactly like one that does not exist.
    not_found = {a["message"].split()[1] for a in answers if a["code"] == "not_found"}
    assert not_found == {"run", "step"}
    assert state() == before
