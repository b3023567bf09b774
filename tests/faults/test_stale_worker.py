"""A worker that lost its run's lease writes nothing more. Two executions of one run: the first is presumed
dead (its lease expired in the database) and a second claims the run while the first goes on; every
write the first attempts after that — a step, an update, a pause, a reply, an ending — affects nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from assistant.conversation.services import chat_send
from assistant.models import AgentChat, AgentMessage, AgentRun, AgentStep
from assistant.runs.lease import Heartbeat, LeaseLost, lease_claim
from assistant.tasks import run_turn as run_turn_task
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from assistant.tools import tools_for
from assistant.turn.journal import StepJournal
from tests.conftest import WorkerProcess, assistant_settings_with, wait_for, wait_for_run
from tests.testapp.models import Effect


def send(user: Any, text: str, model: str) -> AgentRun:
    with assistant_settings_with(MODEL=model):
        return chat_send(user=user, content=text).run


def take_over(run: AgentRun) -> None:
    """What the sweeper does for a worker it presumes dead: the lease has run out, the run is queued
    again, and a free worker process claims it while the first one is still busy with it."""
    AgentRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    run_turn_task.delay(run.pk)
    wait_for(lambda: AgentRun.objects.get(pk=run.pk).attempts == 2, what="the second claim")


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_worker_that_lost_its_lease_during_a_tool_leaves_the_new_holders_record_alone(
    alice: Any, celery_worker: WorkerProcess, script: Callable[..., str]
) -> None:
    model = script(
        {"tool_calls": [{"name": "test_wait", "arguments": {"seconds": 3}}]},
        {"tool_calls": [{"name": "test_record_effect", "arguments": {"label": "after"}}]},
        {"text": "Done once."},
    )
    run = send(alice, "wait, then record", model)
    wait_for(lambda: AgentStep.objects.filter(run=run, tool_name="test_wait", state="started").exists(),
             what="the first worker in its tool")
    take_over(run)
    wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    celery_worker.wait_idle()  # the first execution woke up from its tool and did what it does
    run.refresh_from_db()

    assert (run.status, run.reply, run.attempts) == ("succeeded", "Done once.", 2), run.error
    assert Effect.objects.filter(label="after").count() == 1
    assert AgentMessage.objects.filter(run=run, role="assistant").count() == 1
    steps = list(run.steps.order_by("seq"))
    assert [(s.kind, s.tool_name) for s in steps] == [
        ("model_call", ""), ("tool_call", "test_wait"), ("model_call", ""), ("tool_call", "test_record_effect"),
        ("model_call", ""),
    ]
    # The second holder found the tool unfinished and recorded its outcome as unknown; the first worker,
    # waking up after it lost the lease, did not overwrite that record.
    waited = steps[1]
    assert (waited.result["status"], waited.took_effect) == ("unknown", None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_worker_that_lost_its_lease_while_the_model_answered_writes_no_reply(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    stale = openai_stream([f"stale{i} " for i in range(20)])
    stale.sse_interval = 0.1  # the first worker's answer ends after about two seconds
    fresh = openai_stream([f"fresh{i} " for i in range(20)])
    fresh.sse_interval = 0.15  # the second holder's, about a second after that
    fake_openai.queue(stale, fresh)
    run = send(alice, "tell me something", "openai:fake-gpt")
    wait_for(lambda: len(fake_openai.requests) == 1, what="the first worker's model call")
    take_over(run)
    wait_for(lambda: len(fake_openai.requests) == 2, what="the second holder's model call")
    wait_for_run(run.pk, *AgentRun.ENDED_STATUSES)
    celery_worker.wait_idle()
    run.refresh_from_db()

    expected = "".join(f"fresh{i} " for i in range(20)).strip()
    assert (run.status, run.reply, run.attempts) == ("succeeded", expected, 2), run.error
    assert list(AgentMessage.objects.filter(run=run, role="assistant").values_list("content", flat=True)) == [expected]
    (answered,) = run.steps.filter(kind="model_call")
    assert answered.result["text"].strip() == expected


def queued_run(user: Any) -> AgentRun:
    """A run waiting for a worker, made without enqueueing it: the tests below are the only workers."""
    chat = AgentChat.objects.create(owner=user, title="stale")
    run = AgentRun.objects.create(owner=user, chat=chat, model="offline")
    AgentMessage.objects.create(chat=chat, owner=user, role="user", content="delete Home", run=run)
    return run


def everything() -> list[Any]:
    return [
        *AgentStep.objects.order_by("pk").values_list(),
        *AgentRun.objects.order_by("pk").values_list(),
        *AgentMessage.objects.order_by("pk").values_list(),
    ]


@pytest.mark.django_db(transaction=True)
def test_every_write_of_a_worker_that_lost_its_lease_is_refused_and_changes_nothing(alice: Any) -> None:
    first = lease_claim(queued_run(alice).pk, "first-worker")
    assert first is not None
    journal = StepJournal(first, "first-worker", [])
    started = journal.add(kind="tool_call", state="started", tool_name="tracker_project_list", call_id="c1")
    delete = next(tool for tool in tools_for(alice) if tool.name == "tracker_project_delete")

    # The lease runs out and another worker claims the run while the first one goes on.
    AgentRun.objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lease_claim(first.pk, "second-worker") is not None
    before = everything()

    writes: dict[str, Callable[[], Any]] = {
        "a new step": lambda: journal.add(kind="notice", reason="still here"),
        "a step's outcome": lambda: journal.finish_step(started, {"status": "data", "took_effect": False}),
        "an outcome staged for the next write": lambda: (
            journal.finish_step(started, {"status": "data", "took_effect": False}, stage=True), journal.flush()
        ),
        "a model's answer staged with the call it asks for": lambda: (
            journal.add(stage=True, kind="model_call", result={"text": "", "tool_calls": []}),
            journal.add(kind="tool_call", state="started", tool_name="tracker_project_list", call_id="c3"),
        ),
        "a pause for confirmation": lambda: journal.pause(
            delete, None, kind="tool_call", tool_name=delete.name, call_id="c2", arguments={"pk": 1}
        ),
        "the reply": lambda: journal.succeed(alice, "A stale reply."),
        "the end of the run": lambda: journal.stop("failed", "internal_error", "stale"),
        "a summary": lambda: journal.store_summary(
            AgentMessage(chat_id=first.chat_id, owner=alice, role="summary", content="stale", run=first)
        ),
    }
    refused = []
    for name, write in writes.items():
        with pytest.raises(LeaseLost):
            write()
        refused.append(name)
    assert refused == list(writes)
    assert everything() == before
    assert AgentRun.objects.get(pk=first.pk).lease_owner == "second-worker"


@contextmanager
def renewals_refused() -> Iterator[None]:
    """The database refuses every lease renewal (an UPDATE that only moves the expiry), as an unreachable or
    failing database would; everything else still works."""
    with connection.cursor() as cursor:
        cursor.execute("""
            CREATE FUNCTION refuse_lease_renewal() RETURNS trigger AS $$
            BEGIN
                IF NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at
                   AND NEW.lease_owner = OLD.lease_owner AND NEW.status = OLD.status THEN
                    RAISE EXCEPTION 'lease renewal refused';
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_lease_renewal BEFORE UPDATE ON assistant_agentrun
                FOR EACH ROW EXECUTE FUNCTION refuse_lease_renewal();
        """)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_lease_renewal ON assistant_agentrun")
            cursor.execute("DROP FUNCTION refuse_lease_renewal()")


@contextmanager
def renewals_hang(run: AgentRun) -> Iterator[None]:
    """The run's row stays locked by another transaction: a renewal waits, as against a hung database."""
    with transaction.atomic():
        AgentRun.objects.select_for_update().get(pk=run.pk)
        yield


LEASE = 3.0  # seconds: short, to keep the test quick


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fault", [renewals_refused, renewals_hang], ids=["renewal refused", "renewal hangs"])
def test_a_worker_whose_lease_cannot_be_renewed_stops_before_another_could_claim_the_run(
    alice: Any, fault: Callable[..., Any]
) -> None:
    run = lease_claim(queued_run(alice).pk, "stranded-worker", lease_seconds=LEASE)
    assert run is not None
    # The fault is left before the heartbeat stops, so that a hanging renewal is let go first.
    with (
        Heartbeat(run.pk, "stranded-worker", lease_seconds=LEASE) as heartbeat,
        fault(*([run] if fault is renewals_hang else [])),
    ):
        assert heartbeat.holds()
        wait_for(lambda: not heartbeat.holds(), timeout=2 * LEASE, what="the worker to stop acting")
        stopped_at = timezone.now()
        if fault is renewals_refused:
            wait_for(heartbeat.lost.is_set, timeout=LEASE, what="the heartbeat to give the run up")
    # The lease this worker held ran out only after it had stopped: nobody could claim the run before.
    assert stopped_at < run.lease_expires_at
