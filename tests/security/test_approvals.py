"""An approval is bound to the action the person saw: each tool call is its own step, and a confirm names
the step it answers. Through the real socket, the real worker and the real database; only the model is
replaced (a script, or a fake provider server speaking its real HTTP API)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from assistant.conversation.services import chat_send, run_confirm
from assistant.models import AgentRun, AgentStep
from assistant.runs.lease import lease_claim, new_holder
from assistant.testing.providers import FakeAnthropicServer, anthropic_stream, provider_settings
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.testing.sockets import settle
from assistant.turn.loop import run_turn
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


# --- one step per call, whatever ids the model gave --------------------------------------------------------


def approve_first_deny_second(alice: Any, first: Project, second: Project) -> int:
    """Send a request whose model asks to delete `first` and `second`; approve the first card and deny the
    second, asserting that each card shows one project and that approving one deletes only it."""
    tab = connect(alice)

    async def scenario() -> int:
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": "delete A and B"})
        asked = (await receive_until(tab, "assistant.confirm"))[-1]
        assert asked["step"]["arguments"] == {"pk": first.pk}
        await tab.send_json_to(answer(asked, approve=True))
        events = await receive_until(tab, "assistant.confirm", "assistant.replied", "assistant.reply_failed")
        # The second call is a question of its own: approving the first must not have run it.
        assert events[-1]["type"] == "assistant.confirm", [event["type"] for event in events]
        asked_again = events[-1]
        assert asked_again["step"]["arguments"] == {"pk": second.pk}
        assert asked_again["step"]["id"] != asked["step"]["id"]
        assert not await database_sync_to_async(exists)(first)
        assert await database_sync_to_async(exists)(second)
        await tab.send_json_to(answer(asked_again, approve=False))
        replied = (await receive_until(tab, "assistant.replied", "assistant.reply_failed"))[-1]
        assert replied["type"] == "assistant.replied", replied
        await tab.disconnect()
        return int(asked["run_id"])

    return asyncio.run(scenario())


def assert_each_call_has_its_own_step(run_id: int, first: Project, second: Project) -> list[AgentStep]:
    deleted, kept = tool_steps(run_id)
    assert (deleted.arguments, deleted.confirmation, deleted.result["status"]) == ({"pk": first.pk}, "approved", "done")
    assert (kept.arguments, kept.confirmation, kept.result["status"]) == ({"pk": second.pk}, "denied", "declined")
    assert deleted.call_id and kept.call_id and deleted.call_id != kept.call_id
    assert not exists(first) and exists(second)
    return [deleted, kept]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_two_scripted_calls_sharing_one_id_are_two_steps_each_approved_on_its_own(
    alice: Any, two_projects: tuple[Project, Project], celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    first, second = two_projects
    model = script(
        {"tool_calls": [{"id": "dup", "name": DELETE, "arguments": {"pk": first.pk}},
                        {"id": "dup", "name": DELETE, "arguments": {"pk": second.pk}}]},
        {"text": "Deleted A; B stays."},
    )
    with assistant_settings_with(MODEL=model):
        run_id = approve_first_deny_second(alice, first, second)
    assert_each_call_has_its_own_step(run_id, first, second)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_two_streamed_openai_calls_sharing_one_id_are_told_apart_and_answered_in_pairs(
    alice: Any, two_projects: tuple[Project, Project], celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    first, second = two_projects
    fake_openai.queue(
        openai_stream([], [("dup", DELETE, {"pk": first.pk}), ("dup", DELETE, {"pk": second.pk})]),
        openai_stream(["Deleted A; B stays."]),
    )
    with assistant_settings_with(MODEL="openai:fake-gpt"):
        run_id = approve_first_deny_second(alice, first, second)
    deleted, kept = assert_each_call_has_its_own_step(run_id, first, second)

    # What went back to the provider pairs each result with its own call, under ids that tell them apart.
    messages = fake_openai.bodies[-1]["messages"]
    asked = next(message for message in messages if message["role"] == "assistant" and message.get("tool_calls"))
    ids = {call["id"]: call["function"]["arguments"] for call in asked["tool_calls"]}
    assert len(ids) == 2
    results = {message["tool_call_id"]: message["content"] for message in messages if message["role"] == "tool"}
    assert set(results) == set(ids) == {deleted.call_id, kept.call_id}
    assert str(first.pk) in ids[deleted.call_id] and '"done"' in results[deleted.call_id]
    assert str(second.pk) in ids[kept.call_id] and '"declined"' in results[kept.call_id]


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as fake:
        yield fake


@pytest.mark.django_db
def test_two_anthropic_tool_uses_sharing_one_id_are_told_apart_and_answered_in_pairs(
    alice: Any, two_projects: tuple[Project, Project], anthropic_server: FakeAnthropicServer
) -> None:
    # The turn runs in this thread (as a worker would run it): `chat_send` enqueues only on commit, which a
    # plain `django_db` test never reaches. The lease's heartbeat renews on a connection of its own, which
    # cannot see this test's uncommitted run: a lease longer than the test keeps it from ever renewing (a
    # first `import anthropic` on a loaded machine outlasts the default lease's first renewal).
    first, second = two_projects
    anthropic_server.queue(
        anthropic_stream([], [("toolu_dup", DELETE, {"pk": first.pk}), ("toolu_dup", DELETE, {"pk": second.pk})]),
        anthropic_stream(["Deleted A; B stays."]),
    )
    providers = provider_settings(claude={"kind": "anthropic", "base_url": anthropic_server.base_url, "api_key": "k"})
    with assistant_settings_with(MODEL="claude:fake-claude", LEASE_SECONDS=600, **providers):
        run = chat_send(user=alice, content="delete A and B").run
        assert run_turn(run.pk, holder=new_holder(), claim=lease_claim) == "awaiting_confirmation"
        (asked,) = AgentStep.objects.filter(run=run, state="awaiting_confirmation")
        assert asked.arguments == {"pk": first.pk}
        run_confirm(user=alice, run_id=run.pk, step_id=asked.pk, approve=True)
        assert run_turn(run.pk, holder=new_holder(), claim=lease_claim) == "awaiting_confirmation"
        assert not exists(first) and exists(second)
        (asked_again,) = AgentStep.objects.filter(run=run, state="awaiting_confirmation", confirmation="")
        assert asked_again.arguments == {"pk": second.pk}
        run_confirm(user=alice, run_id=run.pk, step_id=asked_again.pk, approve=False)
        assert run_turn(run.pk, holder=new_holder(), claim=lease_claim) == "succeeded"
    deleted, kept = assert_each_call_has_its_own_step(run.pk, first, second)

    turns = anthropic_server.bodies[-1]["messages"]
    uses = {block["id"]: block["input"] for block in turns[1]["content"] if block["type"] == "tool_use"}
    results = {block["tool_use_id"]: block["content"] for block in turns[2]["content"]}
    assert uses == {deleted.call_id: {"pk": first.pk}, kept.call_id: {"pk": second.pk}}
    assert '"done"' in results[deleted.call_id] and '"declined"' in results[kept.call_id]


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

    async def scenario() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
        assert (await alices_tab.connect())[0] and (await bobs_tab.connect())[0]
        answers = []
        for number, (tab, fields, _code) in enumerate(cases):
            await tab.send_json_to({"type": "assistant.confirm", "approve": True, "request_id": number, **fields})
            answers.append((await receive_until(tab, "assistant.error", "assistant.step"))[-1])
        after = await settle((alices_tab, alice), (bobs_tab, bob))
        for tab in (alices_tab, bobs_tab):
            await tab.disconnect()
        return answers, after

    answers, after = asyncio.run(scenario())
    assert [(a["type"], a.get("code"), a.get("request_id")) for a in answers] == [
        ("assistant.error", code, n) for n, (_t, _f, code) in enumerate(cases)
    ]
    assert after == [[], []]  # nothing was announced to anyone: nothing happened
    # Another person's step or run answers exactly like one that does not exist.
    not_found = {a["message"].split()[1] for a in answers if a["code"] == "not_found"}
    assert not_found == {"run", "step"}
    assert state() == before
