"""The offline demo model when the person answers its question: after "Which book (its id)?" or "Which
project (its id or its exact name)?", a reply of just the value ("5", "Home", "the one called Home") is
joined to the request it was asked for — with the page context sent before it, too, and through the demo
society, where the member that asked gets its task again with the value in it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.conversation.services import chat_send
from assistant.llm import Message, ModelResponse, Tool, ToolCall, get_model
from assistant.models import AgentChat, AgentRun
from assistant.runs.lease import lease_claim, new_holder
from assistant.tools import tools_for
from assistant.turn.loop import run_turn
from tests.conftest import WorkerProcess, wait_for_run
from tests.llm.test_offline_books import BOOKS
from tests.llm.test_offline_requests import page_message, project_page
from tracker.models import Project, Task

pytestmark = pytest.mark.django_db



def found(call: ToolCall, rows: list[dict[str, Any]] | None = None) -> str:
    """A stand-in for the tools: a read finds `rows` (one row named as searched by default)."""
    if call.name.endswith("_list"):
        term = call.arguments.get("search") or "One"
        return json.dumps({"status": "data", "data": {"results": rows or [{"id": 41, "name": term, "title": term}]}})
    return json.dumps({"status": "done", "took_effect": True, "data": {}})


def turn(history: list[Message], text: str, tools: list[Tool], *, page: dict[str, Any] | None = None,
         rows: list[dict[str, Any]] | None = None) -> tuple[list[ToolCall], str]:
    """One turn after `history`, run as the loop runs it; the reply is added to `history` as the turn would."""
    history.append(Message.user(text))
    messages = [*history[:-1], *([page_message(page)] if page else []), history[-1]]
    calls: list[ToolCall] = []
    for _ in range(6):
        response: ModelResponse = get_model("offline").call_tools(messages, tools)
        messages.append(response.to_message())
        if not response.tool_calls:
            history.append(Message.assistant(response.text))
            return calls, response.text
        calls += response.tool_calls
        messages += [Message.tool(call.id, found(call, rows)) for call in response.tool_calls]
    raise AssertionError("the offline model did not finish")


@pytest.fixture
def offered(alice: Any) -> list[Tool]:
    return tools_for(alice)


def test_an_id_answers_which_book() -> None:
    history: list[Message] = []
    calls, reply = turn(history, "rename the book to 'Emma'", BOOKS)
    assert calls == [] and reply.startswith("Which book (its id)?")

    calls, _ = turn(history, "5", BOOKS)

    assert [(call.name, call.arguments) for call in calls] == [("books_book_rename", {"pk": 5, "title": "Emma"})]


@pytest.mark.parametrize("answer", ["Home", "the one called Home", "'Home'", "project Home", "It's Home."])
def test_a_name_answers_which_project(offered: list[Tool], answer: str) -> None:
    history: list[Message] = []
    _, reply = turn(history, "add a task 'Buy milk'", offered)
    assert reply.startswith("Which project (its id or its exact name)?")

    calls, _ = turn(history, answer, offered)

    assert [(call.name, call.arguments) for call in calls] == [
        ("tracker_task_create", {"title": "Buy milk", "project": "Home"})]


def test_two_questions_in_a_row_are_joined_to_the_first_request(offered: list[Tool]) -> None:
    history: list[Message] = []
    _, reply = turn(history, "add a task", offered)
    assert reply.startswith("Which project (its id or its exact name), and what title (in quotes)?")
    calls, reply = turn(history, "Home", offered)
    assert calls == [] and reply.startswith("What title (in quotes)?")

    calls, _ = turn(history, "'Buy milk'", offered)

    assert [(call.name, call.arguments) for call in calls] == [
        ("tracker_task_create", {"title": "Buy milk", "project": "Home"})]


def test_a_number_answers_which_of_several_matches(offered: list[Tool]) -> None:
    history: list[Message] = []
    twins = [{"id": 7, "name": "Home"}, {"id": 8, "name": "Home"}]
    _, reply = turn(history, "archive the project 'Home'", offered, rows=twins)
    assert reply.startswith("More than one project matches “Home”")

    calls, _ = turn(history, "7", offered, rows=twins)

    assert [(call.name, call.arguments) for call in calls] == [("tracker_project_archive", {"pk": 7, "archived": True})]


def test_the_answer_is_joined_with_the_page_context_before_it(offered: list[Tool], home: Project) -> None:
    history: list[Message] = []
    _, reply = turn(history, "rename this", offered, page=project_page(home))
    assert reply.startswith("What name (in quotes)?")

    calls, _ = turn(history, "Garden", offered, page=project_page(home))

    assert [(call.name, call.arguments) for call in calls] == [
        ("tracker_project_update", {"pk": home.pk, "name": "Garden"})]


def test_a_new_request_after_a_question_is_taken_as_it_is(offered: list[Tool]) -> None:
    history: list[Message] = []
    turn(history, "add a task 'Buy milk'", offered)

    calls, _ = turn(history, "list my projects", offered)
    assert [call.name for call in calls] == ["tracker_project_list"]
    calls, reply = turn(history, "no", offered)
    assert calls == [] and not Task.objects.exists()


@pytest.fixture
def home(alice: Any) -> Project:
    return Project.objects.create(owner=alice, name="Home")


def ask(user: Any, text: str, chat_id: int | None = None, page: str | None = None) -> AgentRun:
    run = chat_send(user=user, content=text, chat_id=chat_id, page=page).run
    status = run_turn(run.pk, holder=new_holder(), claim=lease_claim)
    run.refresh_from_db()
    assert status == run.status, (status, run.status, run.error)
    return run


def test_through_the_loop_the_chat_history_carries_the_question(alice: Any, home: Project, settings: Any) -> None:
    settings.ASSISTANT = {**settings.ASSISTANT, "MODEL": "offline", "SPEC": "default"}
    asked = ask(alice, "add a task 'Buy milk'")
    assert asked.reply.startswith("Which project (its id or its exact name)?")
    assert not Task.objects.exists()

    run = ask(alice, "the one called Home", chat_id=asked.chat_id, page=f"/tracker/projects/{home.pk}/")

    assert run.status == AgentRun.Status.SUCCEEDED, run.error
    assert list(Task.objects.values_list("project__name", "title")) == [("Home", "Buy milk")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_the_demo_society_gives_the_answer_to_the_member_that_asked(
    alice: Any, home: Project, celery_worker: WorkerProcess
) -> None:
    chat = AgentChat.objects.create(owner=alice, spec="orchestrator")
    first = wait_for_run(chat_send(user=alice, content="rename the project to 'Garden'", chat_id=chat.pk).run.pk,
                         *AgentRun.ENDED_STATUSES, timeout=60)
    assert first.status == "succeeded", first.error
    assert "Which project (its id)?" in first.reply

    top = wait_for_run(chat_send(user=alice, content="Home", chat_id=chat.pk).run.pk, *AgentRun.ENDED_STATUSES,
                       timeout=60)

    assert top.status == "succeeded", top.error
    [keeper] = AgentRun.objects.filter(root=top)
    assert (keeper.spec, keeper.task) == ("keeper", "Rename the project 'Home' to 'Garden'.")
    home.refresh_from_db()
    assert home.name == "Garden"
