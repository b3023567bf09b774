"""Stop stops the whole tree: once any run on a member's path has been asked to stop, no member starts and no
step of any run of the tree begins — checked where it cannot race with the Stop (the rows the start locks, in
its own transaction), at every depth — and a delegation step's record says what its member actually did.

The race is tried three ways: a Stop that commits just before a start (the start writes nothing), a Stop and a
start at once (whichever locks first, the other sees it), and a person's client that presses Stop the moment
the demo keeper's step finishes, over many trees, through the real socket, worker and database."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection, transaction
from django.utils import timezone

from assistant.conversation.services import run_cancel
from assistant.llm import ToolCall
from assistant.models import AgentChat, AgentRun, AgentStep
from assistant.runs.lease import LeaseLost
from assistant.runs.lifecycle import run_config
from assistant.society.offer import delegation_tools
from assistant.testing.sockets import connect, receive_until
from assistant.turn.handoff import Delegation, delegations_start
from assistant.turn.journal import StepJournal
from tests.conftest import WorkerProcess, wait_for, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

HOLDER = "test-holder"


def _running(user: Any, *, spec: str, parent: AgentRun | None = None) -> AgentRun:
    """A run a worker (HOLDER) is working on, as the turn holds it."""
    chat = parent.chat if parent is not None else AgentChat.objects.create(owner=user, spec=spec)
    return AgentRun.objects.create(
        owner=user, chat=chat, spec=spec, model="scripted:none", config=run_config(spec=spec),
        status=AgentRun.Status.RUNNING, lease_owner=HOLDER, lease_expires_at=timezone.now() + timedelta(minutes=5),
        started_at=timezone.now(), parent=parent, root=(parent.root or parent) if parent is not None else None,
        depth=parent.depth + 1 if parent is not None else 0, task="a task" if parent is not None else "",
    )


def _ask_clerk(run: AgentRun, *, count: int = 2, holder: str = HOLDER) -> list[int]:
    """What the run's worker (`holder`) does when its model asks the clerk `count` times in one answer."""
    [tool] = [tool for tool in delegation_tools(owner=run.owner, asking=run.spec, depth=run.depth)
              if tool.member == "clerk"]
    journal = StepJournal(run, holder, list(run.steps.order_by("seq")))
    calls = [Delegation(ToolCall(id=f"c{index}", name=tool.name, arguments={"task": f"Add task {index}."}), tool,
                        None) for index in range(count)]
    started = delegations_start(journal, calls)
    assert journal.cancelled.is_set() == (not started)
    return started


@pytest.fixture
def tree(alice: Any) -> Iterator[tuple[AgentRun, AgentRun]]:
    """The demo orchestrator at work, and the keeper it asked, at work too (it may ask the clerk)."""
    top = _running(alice, spec="orchestrator")
    keeper = _running(alice, spec="keeper", parent=top)
    yield top, keeper


def test_a_stop_committed_before_a_member_would_start_starts_nothing_and_writes_no_step(
    alice: Any, tree: tuple[AgentRun, AgentRun]
) -> None:
    top, keeper = tree
    # Stop on the top run: the keeper's own flag is set too (it is at work), but the top's alone is enough.
    AgentRun.objects.filter(pk=top.pk).update(cancel_requested=True)
    assert _ask_clerk(keeper) == []
    assert not AgentRun.objects.filter(parent=keeper).exists()
    assert not keeper.steps.exists()

    # The keeper's own answer is fenced the same way: no member starts from a run whose asker was stopped.
    AgentRun.objects.filter(pk=top.pk).update(cancel_requested=False)
    assert _ask_clerk(keeper, count=1) != []
    AgentRun.objects.filter(pk=top.pk).update(status=AgentRun.Status.CANCELLED, finished_at=timezone.now())
    assert _ask_clerk(keeper, count=1) == []
    assert AgentRun.objects.filter(parent=keeper).count() == 1


def test_a_member_asked_by_a_stopped_run_hears_it_at_its_first_write(
    alice: Any, tree: tuple[AgentRun, AgentRun]
) -> None:
    """A member that was started while the Stop was on its way finds out from its asker's row: its claim and
    every write of its worker read it, so nothing of it begins."""
    from assistant.runs.lease import lease_claim, write_fenced

    top, keeper = tree
    [clerk_id, _] = _ask_clerk(keeper)
    AgentRun.objects.filter(pk=keeper.pk).update(cancel_requested=True)
    claimed = lease_claim(clerk_id, "clerk-holder")
    assert claimed is not None and claimed.above_stopped
    step = AgentStep(run_id=clerk_id, seq=1, kind=AgentStep.Kind.MODEL_CALL)
    assert write_fenced(inserts=[step], run_id=clerk_id, holder="clerk-holder").cancel_requested
    # Its answer is never written over the Stop.
    assert not write_fenced(updates=[(claimed, ["reply"])], run_id=clerk_id, holder="clerk-holder",
                            unless_cancelled=True).written


def test_a_stop_and_a_start_at_once_never_leave_a_member_working(
    alice: Any, tree: tuple[AgentRun, AgentRun]
) -> None:
    top, keeper = tree
    # The start goes first and holds its transaction open: the Stop waits for it, then finds the new members.
    start_holds = threading.Event()
    release_start = threading.Event()
    outcome: dict[str, Any] = {}

    def start_and_hold() -> None:
        try:
            with transaction.atomic():
                outcome["started"] = _ask_clerk(keeper)
                start_holds.set()
                release_start.wait(30)
        finally:
            connection.close()

    def stop() -> None:
        try:
            outcome["stopped"] = run_cancel(user=alice, run_id=top.pk)
        finally:
            connection.close()

    starter = threading.Thread(target=start_and_hold)
    starter.start()
    assert start_holds.wait(30)
    stopper = threading.Thread(target=stop)
    stopper.start()
    # The positive sign that the Stop is waiting on the start: its lock request on the top's row is queued.
    wait_for(lambda: _waiting_for_a_lock() >= 1, what="the Stop to wait for the start")
    release_start.set()
    starter.join(30)
    stopper.join(30)
    assert len(outcome["started"]) == 2
    # The members started just before the Stop are among the runs it stopped: queued, they ended at once.
    for child in AgentRun.objects.filter(parent=keeper):
        assert (child.status, child.stop_reason) == ("cancelled", "cancelled")

    # The Stop goes first and holds its transaction open: the start waits for it, then starts nothing.
    top2 = _running(alice, spec="orchestrator")
    keeper2 = _running(alice, spec="keeper", parent=top2)
    stop_holds, release_stop = threading.Event(), threading.Event()

    def stop_and_hold() -> None:
        try:
            with transaction.atomic():
                run_cancel(user=alice, run_id=top2.pk)
                stop_holds.set()
                release_stop.wait(30)
        finally:
            connection.close()

    def start() -> None:
        try:
            outcome["started2"] = _ask_clerk(keeper2)
        finally:
            connection.close()

    stopper = threading.Thread(target=stop_and_hold)
    stopper.start()
    assert stop_holds.wait(30)
    starter = threading.Thread(target=start)
    starter.start()
    wait_for(lambda: _waiting_for_a_lock() >= 1, what="the start to wait for the Stop")
    release_stop.set()
    stopper.join(30)
    starter.join(30)
    assert outcome["started2"] == []
    assert not AgentRun.objects.filter(parent=keeper2).exists() and not keeper2.steps.exists()


def _waiting_for_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")
        return int(cursor.fetchone()[0])


def test_two_workers_starting_the_same_members_at_once_start_them_once(
    alice: Any, tree: tuple[AgentRun, AgentRun]
) -> None:
    """A run handed to two workers (a redelivery while the first still works): both come to the same answer's
    delegations at once; only the one holding the run's lease starts members, and the other starts nothing."""
    _top, keeper = tree
    both_ready = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def start(holder: str) -> None:
        try:
            both_ready.wait(30)
            outcomes[holder] = _ask_clerk(keeper, holder=holder)
        except LeaseLost as lost:
            outcomes[holder] = lost
        finally:
            connection.close()

    workers = [threading.Thread(target=start, args=(holder,)) for holder in (HOLDER, "a-presumed-dead-worker")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert isinstance(outcomes["a-presumed-dead-worker"], LeaseLost)
    assert len(outcomes[HOLDER]) == 2
    assert sorted(AgentRun.objects.filter(parent=keeper).values_list("pk", flat=True)) == sorted(outcomes[HOLDER])
    assert keeper.steps.filter(tool_name="ask_clerk").count() == 2


TREES = 12
REQUEST = "create a project {name} with the tasks 'a' and 'b', then tell me my open tasks"


def _stop_seen(top_id: int) -> Any:
    """A moment just after the top run's Stop reached the database (read as fast as the database answers)."""
    while not AgentRun.objects.filter(pk=top_id).filter(cancel_requested=True).exists() and \
            AgentRun.objects.filter(pk=top_id, status__in=AgentRun.ACTIVE_STATUSES).exists():
        pass
    moment = timezone.now()
    connection.close()
    return moment


@pytest.mark.worker
def test_stop_the_moment_the_keeper_has_created_the_project_stops_the_whole_tree(
    alice: Any, celery_worker: WorkerProcess
) -> None:
    """The person's client presses Stop (or deletes the chat) as soon as the demo keeper's step finishes, as fast
    as a client can:
    after the top run's Stop is in the database no member starts and no action begins (the clerks' tasks are
    not written), and every delegation step says what its member did."""

    async def one_tree(index: int) -> tuple[int, Any]:
        chat = await database_sync_to_async(AgentChat.objects.create)(owner=alice, spec="orchestrator")
        tab = await database_sync_to_async(connect)(alice)
        assert (await tab.connect())[0]
        await tab.send_json_to({"type": "assistant.send", "content": REQUEST.format(name=f"P{index}"),
                                "chat_id": chat.pk})
        created = (await receive_until(tab, lambda e: e["type"] == "assistant.step"
                                       and e["step"].get("tool_name") == "tracker_project_create"
                                       and e["step"].get("state") == "finished", timeout=60))[-1]
        if index % 2:  # Stop by deleting the chat, as the panel's delete does while a run works
            await tab.send_json_to({"type": "assistant.chat_delete", "chat_id": chat.pk})
        else:
            await tab.send_json_to({"type": "assistant.cancel", "run_id": created["run_id"]})
        top_id = await database_sync_to_async(
            lambda: AgentRun.objects.values_list("root_id", flat=True).get(pk=created["run_id"]))()
        # In a thread of its own: the socket's Stop runs in the one its database work shares, and waits for it.
        stopped_at = await database_sync_to_async(_stop_seen, thread_sensitive=False)(top_id)
        await tab.disconnect()
        return top_id, stopped_at

    answered_first = []
    for index in range(TREES):
        top_id, stopped_at = asyncio.run(one_tree(index))
        top = wait_for_run(top_id, *AgentRun.ENDED_STATUSES, timeout=60)
        runs = [top, *(wait_for_run(run.pk, *AgentRun.ENDED_STATUSES, timeout=60)
                       for run in AgentRun.objects.filter(root=top))]
        if top.status == "succeeded" and not top.cancel_requested:
            # The whole tree answered before the Stop reached it (a loaded machine can leave the client that
            # far behind): there was nothing left to stop, and the checks below hold all the same.
            answered_first.append(index)
        else:
            assert (top.status, top.stop_reason) == ("cancelled", "cancelled"), (index, top.error)
        late_members = [(run.spec, run.status) for run in runs if run.created_at > stopped_at]
        assert late_members == [], f"tree {index}: members started after the Stop: {late_members}"
        # A step begun after the Stop was in the database did nothing: its write read the Stop.
        late_effects = [(step.tool_name, step.arguments) for step in
                        AgentStep.objects.filter(run__in=runs, kind="tool_call", created_at__gt=stopped_at,
                                                 took_effect=True)]
        assert late_effects == [], f"tree {index}: actions begun after the Stop: {late_effects}"
        assert not any(run.status == "succeeded" and run.created_at > stopped_at for run in runs)
        _evidence_matches(runs)
    assert len(answered_first) <= TREES // 2, f"the Stop came after the tree's answer in trees {answered_first}"


def _evidence_matches(runs: list[AgentRun]) -> None:
    """Each delegation step says what its member did: an effect exactly when one of the member's steps (or a
    step of the runs it asked) took effect; never "stopped before it answered" when it had answered."""
    by_id = {run.pk: run for run in runs}
    for step in AgentStep.objects.filter(run__in=runs, kind="tool_call", tool_name__startswith="ask_"):
        child = by_id.get((step.result or {}).get("child_run_id"))
        if child is None:
            continue
        subtree = [child.pk, *(run.pk for run in runs if run.parent_id == child.pk)]
        acted = AgentStep.objects.filter(run__in=subtree, kind="tool_call", took_effect=True).exists()
        assert (step.took_effect is True) == acted, (step.tool_name, step.result, child.status)
        if child.status == "succeeded":
            assert step.result["status"] in ("answered", "escalated"), (step.tool_name, step.result)
