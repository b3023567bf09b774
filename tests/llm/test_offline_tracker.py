"""The offline demo model carrying the demo requests end to end: the real run loop, the real tracker tools
and the real database, one chat, the requests in the order a person would type them.

The loop runs in-process (`run_turn` in the test's thread), so no worker is needed; `chat_send` queues a
Celery task only on commit, which a plain `django_db` test never reaches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from assistant.conversation.services import chat_send, run_confirm
from assistant.models import AgentRun, AgentStep
from assistant.runs.lease import lease_claim, new_holder
from assistant.turn.loop import run_turn
from tracker.models import Project, Task

pytestmark = pytest.mark.django_db


@dataclass
class Board:
    """Alice's projects and tasks, and Bob's own "Home" that nothing here may touch."""

    home: Project
    work: Project
    bobs_home: Project
    open_titles: list[str]
    done_titles: list[str]
    bobs_task: Task


@pytest.fixture
def board(alice: Any, bob: Any, settings: Any) -> Board:
    # Whatever the environment chose, these runs are the offline model's.
    settings.ASSISTANT = {**settings.ASSISTANT, "MODEL": "offline"}
    home = Project.objects.create(owner=alice, name="Home")
    work = Project.objects.create(owner=alice, name="Work")
    bobs_home = Project.objects.create(owner=bob, name="Home")
    Task.objects.create(project=home, title="Water plants", status="todo", priority=3, due_date="2026-12-02")
    Task.objects.create(project=work, title="Write report", status="doing")
    Task.objects.create(project=work, title="File taxes", status="done")
    Task.objects.create(project=home, title="Fix the gate", status="done", priority=1)
    bobs_task = Task.objects.create(project=bobs_home, title="Bob's chores", status="todo")
    return Board(home, work, bobs_home, ["Water plants", "Write report"], ["File taxes", "Fix the gate"], bobs_task)


def _turn(run: AgentRun) -> AgentRun:
    """Work on the run in this thread until it answers or pauses, as a worker would."""
    status = run_turn(run.pk, holder=new_holder(), claim=lease_claim)
    run.refresh_from_db()
    assert status == run.status, (status, run.status, run.error)
    return run


def ask(user: Any, text: str) -> AgentRun:
    """Send `text` in the user's current chat and run the turn it starts."""
    return _turn(chat_send(user=user, content=text).run)


def tool_steps(run: AgentRun) -> list[AgentStep]:
    return list(run.steps.filter(kind=AgentStep.Kind.TOOL_CALL).order_by("seq"))


def snapshot() -> set[tuple[Any, ...]]:
    """Every project and task row, to show that a write changed only what it should."""
    projects = {("project", *row) for row in Project.objects.values_list("pk", "owner_id", "name", "archived")}
    tasks = {("task", *row) for row in Task.objects.values_list("pk", "project_id", "title", "status", "priority")}
    return projects | tasks


def test_the_demo_requests_in_one_chat(alice: Any, board: Board) -> None:
    # 1. A read, filtered the way the tool's description defines "open".
    run = ask(alice, "what are my open tasks?")
    assert run.status == AgentRun.Status.SUCCEEDED
    [step] = tool_steps(run)
    assert (step.tool_name, step.arguments, step.took_effect) == (
        "tracker_task_list", {"status__in": ["todo", "doing"]}, False,
    )
    listed = [line for line in run.reply.splitlines() if line.startswith("- ")]
    pages = dict(Task.objects.values_list("title", "pk"))
    # Each task named by a link to its page.
    assert sorted(line[2:].split(" — ")[0] for line in listed) == sorted(
        f"[{title}](/tracker/tasks/{pages[title]}/)" for title in board.open_titles)
    assert run.reply.startswith("Found 2 open tasks:")
    # Fields by name, stored values by their labels, the project by its name rather than its id.
    water, report = pages["Water plants"], pages["Write report"]
    assert (f"- [Water plants](/tracker/tasks/{water}/) — status: to do, priority: high, due date: 2026-12-02, "
            "project: Home") in listed
    assert (f"- [Write report](/tracker/tasks/{report}/) — status: in progress, priority: normal, "
            "project: Work") in listed
    chat_id = run.chat_id

    # 2. A create that names its project; the tool takes the name, within what Alice can see.
    before = snapshot()
    run = ask(alice, "create a task 'Buy milk' in Home")
    assert run.status == AgentRun.Status.SUCCEEDED
    [step] = tool_steps(run)
    assert (step.tool_name, step.arguments, step.took_effect) == (
        "tracker_task_create", {"title": "Buy milk", "project": "Home"}, True,
    )
    milk = Task.objects.get(title="Buy milk")
    assert milk.project == board.home
    assert snapshot() - before == {("task", milk.pk, board.home.pk, "Buy milk", "todo", 2)}
    assert before <= snapshot()
    assert run.reply == "Done: Task “Buy milk” added to Home."

    # 3. The task is found by its quoted title, then completed by its id.
    before = snapshot()
    run = ask(alice, "mark 'Buy milk' done")
    assert run.status == AgentRun.Status.SUCCEEDED
    assert [(s.tool_name, s.arguments, s.took_effect) for s in tool_steps(run)] == [
        ("tracker_task_list", {"search": "Buy milk"}, False),
        ("tracker_task_complete", {"pk": milk.pk}, True),
    ]
    milk.refresh_from_db()
    assert milk.status == Task.Status.DONE
    assert milk.completed_at is not None
    assert snapshot() ^ before == {
        ("task", milk.pk, board.home.pk, "Buy milk", "todo", 2),
        ("task", milk.pk, board.home.pk, "Buy milk", "done", 2),
    }
    assert "marked done" in run.reply

    # 4. A destructive tool waits for the person; declining changes nothing and says only that.
    before = snapshot()
    run = ask(alice, "delete the project Home")
    assert run.status == AgentRun.Status.AWAITING_CONFIRMATION
    lookup, delete = tool_steps(run)
    assert (lookup.tool_name, lookup.arguments) == ("tracker_project_list", {"search": "Home"})
    assert (delete.tool_name, delete.arguments) == ("tracker_project_delete", {"pk": board.home.pk})
    assert Project.objects.filter(pk=board.home.pk).exists()
    run_confirm(user=alice, run_id=run.pk, step_id=delete.pk, approve=False)
    run = _turn(run)
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.reply == "You declined, so nothing was changed."
    assert not any(step.took_effect for step in tool_steps(run))
    assert snapshot() == before

    # Asked again and approved, the project goes, with its tasks; Bob's "Home" stays.
    run = ask(alice, "delete the project Home")
    assert run.status == AgentRun.Status.AWAITING_CONFIRMATION
    assert tool_steps(run)[-1].arguments == {"pk": board.home.pk}
    run_confirm(user=alice, run_id=run.pk, step_id=tool_steps(run)[-1].pk, approve=True)
    run = _turn(run)
    assert run.status == AgentRun.Status.SUCCEEDED
    assert not Project.objects.filter(pk=board.home.pk).exists()
    assert run.reply == "Done: Project “Home” deleted."
    gone = {row for row in before if (row[0] == "project" and row[1] == board.home.pk)
            or (row[0] == "task" and row[2] == board.home.pk)}
    assert snapshot() == before - gone

    # 5. Nothing to match: it says what it can do and touches nothing.
    before = snapshot()
    run = ask(alice, "sing me a song")
    assert run.status == AgentRun.Status.SUCCEEDED
    assert tool_steps(run) == []
    assert "offline demo model" in run.reply
    for name in ("tracker_task_list", "tracker_task_create", "tracker_task_complete", "tracker_project_delete"):
        assert name in run.reply
    assert snapshot() == before

    # One conversation throughout, every answer from the labelled demo model.
    runs = AgentRun.objects.filter(owner=alice).order_by("id")
    assert {r.chat_id for r in runs} == {chat_id}
    model_steps = AgentStep.objects.filter(run__in=runs, kind=AgentStep.Kind.MODEL_CALL)
    assert model_steps.exists()
    assert all((step.result or {}).get("model") == "offline-demo" for step in model_steps)
    assert all((step.result or {}).get("is_demo") is True for step in model_steps)


def test_bobs_home_is_never_touched(alice: Any, bob: Any, board: Board) -> None:
    """Every request above names "Home"; Bob's project of that name stays out of Alice's reach throughout."""
    bobs_before = {row for row in snapshot() if row[0:2] == ("project", board.bobs_home.pk)
                   or (row[0] == "task" and row[2] == board.bobs_home.pk)}
    for text in ("what are my open tasks?", "create a task 'Buy milk' in Home", "mark 'Buy milk' done"):
        run = ask(alice, text)
        assert run.status == AgentRun.Status.SUCCEEDED
        assert "Bob's chores" not in run.reply
    assert Task.objects.get(title="Buy milk").project == board.home  # not Bob's "Home"
    run = ask(alice, "delete the project Home")
    run_confirm(user=alice, run_id=run.pk, step_id=tool_steps(run)[-1].pk, approve=True)
    run = _turn(run)
    assert run.status == AgentRun.Status.SUCCEEDED

    assert bobs_before <= snapshot()
    assert Task.objects.filter(project=board.bobs_home).count() == 1
    assert not Project.objects.filter(pk=board.home.pk).exists()
    # Every id the model used was one of Alice's.
    alices = set(Project.objects.filter(owner=alice).values_list("pk", flat=True)) | {board.home.pk}
    for step in AgentStep.objects.filter(run__owner=alice, kind=AgentStep.Kind.TOOL_CALL):
        project = step.arguments.get("pk") if "project" in step.tool_name else step.arguments.get("project")
        assert project in alices | {"Home", None}


def test_a_reader_with_reads_alone_shows_stored_choices_by_their_labels(
        alice: Any, board: Board, settings: Any) -> None:
    # The demo society's reader has no form of the tracker's to learn what "todo" or 3 mean: the reads' own
    # schema says it (todo = To do, 3 = High).
    settings.ASSISTANT = {**settings.ASSISTANT, "SPEC": "reader"}
    run = ask(alice, "what are my open tasks?")
    assert run.status == AgentRun.Status.SUCCEEDED and run.spec == "reader"
    water = Task.objects.get(title="Water plants").pk
    assert (f"- [Water plants](/tracker/tasks/{water}/) — status: to do, priority: high, due date: 2026-12-02, "
            "project: Home") in run.reply.splitlines()
