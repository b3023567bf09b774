"""Every run that ends counts exactly once in its owner's profile, whichever way it ends, through the
services that end runs (no worker here; runs a worker really works on are in test_registry_runs.py)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from assistant.access.authority import SentFrom
from assistant.conversation.services import (
    chat_delete,
    chat_send,
    run_cancel,
    run_feedback,
    session_runs_end,
)
from assistant.models import AgentChat, AgentRun, AgentStep
from assistant.turn.sweeper import sweep_runs
from registry.models import WINDOW_SIZE, AgentProfile
from registry.selectors import profile_get, profile_stats, profile_summary, profiles_list
from registry.services import profile_record_invocation
from registry.stats import compute_stats, format_summary
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db


def the_profile(owner: Any, spec_name: str = "default") -> AgentProfile:
    return AgentProfile.objects.get(owner=owner, spec_name=spec_name)


def entries_for(owner: Any, run: AgentRun) -> list[dict[str, Any]]:
    profile = AgentProfile.objects.filter(owner=owner, spec_name=run.spec).first()
    return [entry for entry in (profile.window if profile else []) if entry["run_id"] == run.pk]


def waiting_run(owner: Any, *, session_key: str = "") -> tuple[AgentRun, AgentStep]:
    """A run paused on a confirmation, after one finished read, as a worker leaves it."""
    chat = AgentChat.objects.create(owner=owner)
    sent_from = SentFrom(session_key=session_key, client_address=None, origin="").stored() if session_key else {}
    run = AgentRun.objects.create(owner=owner, chat=chat, status="awaiting_confirmation", started_at=timezone.now(),
                                  **sent_from)
    AgentStep.objects.create(run=run, seq=1, kind="model_call", prompt_tokens=10, completion_tokens=5)
    AgentStep.objects.create(run=run, seq=2, kind="tool_call", tool_name="tracker_task_list", call_id="c1",
                             result={"status": "ok", "took_effect": False}, took_effect=False)
    AgentStep.objects.create(run=run, seq=3, kind="model_call", prompt_tokens=20, completion_tokens=5)
    pending = AgentStep.objects.create(run=run, seq=4, kind="tool_call", tool_name="tracker_project_delete",
                                       call_id="c2", state="awaiting_confirmation", arguments={"pk": 1})
    return run, pending


# --- every way a run ends outside the turn ------------------------------------------------------


def test_a_run_cancelled_while_queued_counts_once_as_cancelled(alice: Any) -> None:
    run = chat_send(user=alice, content="never mind").run
    run_cancel(user=alice, run_id=run.pk)
    run_cancel(user=alice, run_id=run.pk)  # a second click ends nothing more
    [entry] = entries_for(alice, run)
    assert (entry["status"], entry["tool_calls"], entry["intent"]) == ("cancelled", 0, "conversation")
    assert entry["error_summary"] == "Stopped by you."
    assert the_profile(alice).invocations == 1


def test_a_run_cancelled_while_waiting_counts_once_with_its_declined_action(alice: Any) -> None:
    run, _pending = waiting_run(alice)
    run_cancel(user=alice, run_id=run.pk)
    [entry] = entries_for(alice, run)
    assert entry["status"] == "cancelled"
    assert (entry["tool_calls"], entry["tool_errors"], entry["token_usage"]) == (2, 1, 40)
    assert entry["tools_used"] == ["tracker_task_list", "tracker_project_delete"]
    assert entry["intent"] == "tracker_project_delete"  # the write it was asked for, not the read before it
    assert the_profile(alice).tool_usage == {
        "tracker_task_list": {"success": 1, "failure": 0}, "tracker_project_delete": {"success": 0, "failure": 1},
    }


def test_a_waiting_run_superseded_by_a_new_message_counts_once_as_cancelled(alice: Any) -> None:
    run, _pending = waiting_run(alice)
    chat_send(user=alice, content="actually, do something else", chat_id=run.chat_id)
    [entry] = entries_for(alice, run)
    assert entry["status"] == "cancelled"
    assert "Superseded" in entry["error_summary"]
    assert the_profile(alice).invocations == 1  # the new run is queued: not counted before it ends


def test_a_run_whose_session_ended_counts_once_as_cancelled(alice: Any) -> None:
    run, _pending = waiting_run(alice, session_key="ended-session")
    session_runs_end(session_key="ended-session")
    run.refresh_from_db()
    assert run.stop_reason == AgentRun.StopReason.SESSION_ENDED
    [entry] = entries_for(alice, run)
    assert entry["status"] == "cancelled"


def test_a_run_in_a_deleted_chat_counts_once_as_cancelled(alice: Any) -> None:
    run = chat_send(user=alice, content="hello").run
    chat_delete(user=alice, chat_id=run.chat_id)
    [entry] = entries_for(alice, run)
    assert entry["status"] == "cancelled"


def test_a_run_the_sweeper_times_out_counts_once_as_timeout(alice: Any) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    stuck = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="running",
                                    config={"max_wall_seconds": 120}, clock_started_at=long_ago, started_at=long_ago,
                                    lease_owner="a-worker-that-hung",
                                    lease_expires_at=timezone.now() + timedelta(seconds=5))
    assert sweep_runs()["timed_out"] == [stuck.pk]
    assert sweep_runs()["timed_out"] == []
    [entry] = entries_for(alice, stuck)
    assert entry["status"] == "timeout"
    assert entry["duration_ms"] >= 3_600_000
    assert the_profile(alice).invocations == 1


# --- per-call tool counts, intent ---------------------------------------------------------------


def test_tool_counts_are_per_call(alice: Any) -> None:
    profile_record_invocation(owner=alice, spec_name="default", entry={
        "status": "success", "tools_used": ["search", "search", "search"], "failed_tools": ["search"],
    })
    assert the_profile(alice).tool_usage == {"search": {"success": 2, "failure": 1}}


def test_a_run_without_tools_is_a_conversation_and_a_read_only_run_is_its_first_read(alice: Any) -> None:
    talk = chat_send(user=alice, content="hello").run
    run_cancel(user=alice, run_id=talk.pk)
    read = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="queued")
    for seq, name in enumerate(["tracker_project_list", "tracker_task_list"], start=1):
        AgentStep.objects.create(run=read, seq=seq, kind="tool_call", tool_name=name, call_id=f"c{seq}",
                                 result={"status": "ok", "took_effect": False}, took_effect=False)
    run_cancel(user=alice, run_id=read.pk)
    assert entries_for(alice, talk)[0]["intent"] == "conversation"
    assert entries_for(alice, read)[0]["intent"] == "tracker_project_list"
    read.refresh_from_db()
    assert read.intent == "tracker_project_list"  # the run keeps it too, for the admin's lists
    assert profile_stats(the_profile(alice)).top_intents == [("conversation", 1), ("tracker_project_list", 1)]
    assert the_profile(alice).intent_affinity == {"conversation": 1, "tracker_project_list": 1}


# --- quality from feedback ------------------------------------------------------------------------


def test_feedback_after_the_run_was_recorded_updates_its_entry(alice: Any) -> None:
    first = chat_send(user=alice, content="one").run
    run_cancel(user=alice, run_id=first.pk)
    second = chat_send(user=alice, content="two", new_chat=True).run
    run_cancel(user=alice, run_id=second.pk)
    assert "quality_score" not in entries_for(alice, first)[0]

    run_feedback(user=alice, run_id=first.pk, score=1)
    run_feedback(user=alice, run_id=second.pk, score=-1, comment="wrong")
    assert entries_for(alice, first)[0]["quality_score"] == 1.0
    assert entries_for(alice, second)[0]["quality_score"] == 0.0
    assert profile_stats(the_profile(alice)).avg_quality == 0.5

    run_feedback(user=alice, run_id=second.pk, score=0)  # taken back: no score, not a zero
    assert "quality_score" not in entries_for(alice, second)[0]
    assert profile_stats(the_profile(alice)).avg_quality == 1.0
    assert the_profile(alice).invocations == 2  # feedback changes an entry, it adds none


def test_feedback_on_a_run_that_left_the_window_changes_nothing(alice: Any) -> None:
    old = chat_send(user=alice, content="old").run
    run_cancel(user=alice, run_id=old.pk)
    for number in range(WINDOW_SIZE):
        profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": -number})
    before = the_profile(alice).window
    run_feedback(user=alice, run_id=old.pk, score=1)
    assert the_profile(alice).window == before


# --- selectors ------------------------------------------------------------------------------------


def test_the_seeds_reads_as_selectors(alice: Any, bob: Any) -> None:
    assert profile_get(owner=alice, spec_name="default") is None
    for owner, spec_name in [(alice, "default"), (alice, "research"), (bob, "default")]:
        profile_record_invocation(owner=owner, spec_name=spec_name, entry={"status": "success", "tools_used": ["t"]})
    assert profile_get(owner=alice, spec_name="research") == the_profile(alice, "research")
    assert [(p.owner, p.spec_name) for p in profiles_list(owner=alice)] == [(alice, "default"), (alice, "research")]
    assert {p.owner for p in profiles_list(spec_name="default")} == {alice, bob}
    assert profiles_list().count() == 3
    assert profile_summary(owner=bob, spec_name="default") == (
        'Agent "default" — 1 prior invocations, 100% success rate, → 0% trend. Top tools: t.'
    )


def test_the_summary_line_the_prompt_gets_is_the_one_the_whole_window_makes(alice: Any) -> None:
    # profile_summary counts in the database what the line needs; the admin's stats read the whole window.
    # Windows of every size to the full one, odd and even halves, ties among tools (broken by first use),
    # entries without tools or with them missing, and the organisation's own profile.
    rng = random.Random(24)
    tools = ["tracker_task_list", "tracker_task_create", "tracker_project_stats", "ask_clerk", "t"]
    for number, size in enumerate([1, 2, 3, 4, 5, 7, 10, 33, 64, 99, WINDOW_SIZE]):
        window: list[dict[str, Any]] = []
        for _ in range(size):
            entry: dict[str, Any] = {"status": rng.choice(["success", "success", "error", "timeout", "cancelled"])}
            if rng.random() < 0.8:
                entry["tools_used"] = [rng.choice(tools) for _ in range(rng.randint(0, 4))]
            window.append(entry)
        for owner in (alice, None):
            spec_name = f"spec-{number}"
            AgentProfile.objects.create(owner=owner, spec_name=spec_name, invocations=size + number, window=window)
            expected = format_summary(spec_name, size + number, compute_stats(window))
            assert expected and profile_summary(owner=owner, spec_name=spec_name) == expected
    tied = [{"status": "success", "tools_used": ["b", "a"]}, {"status": "error", "tools_used": ["c", "a", "b"]},
            {"status": "success", "tools_used": ["c"]}, {"status": "success"}]
    AgentProfile.objects.create(owner=alice, spec_name="tied", invocations=4, window=tied)
    assert profile_summary(owner=alice, spec_name="tied") == (
        'Agent "tied" — 4 prior invocations, 75% success rate, ↑ 50% trend. Top tools: b, a, c.'
    )
    AgentProfile.objects.create(owner=alice, spec_name="empty", invocations=3, window=[])
    assert profile_summary(owner=alice, spec_name="empty") == ""
    assert profile_summary(owner=alice, spec_name="never used") == ""


# --- concurrency --------------------------------------------------------------------------------


def in_threads(count: int, work: Callable[[int], None]) -> None:
    """Run work(0..count-1) in `count` threads at once, each on its own database connection."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            work(index)
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors


@pytest.mark.django_db(transaction=True)
def test_fifty_runs_ending_at_once_count_exactly(alice: Any) -> None:
    """50 workers end 50 waiting runs at the same moment (each on its own connection) while feedback on
    25 earlier runs arrives: every count is exact."""
    runs = [waiting_run(alice)[0] for _ in range(50)]
    # Made directly: a message sent here would reach the broker, and a later test's worker.
    rated = [AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice)) for _ in range(25)]
    for run in rated:
        run_cancel(user=alice, run_id=run.pk)

    def end_or_rate(index: int) -> None:
        run_cancel(user=alice, run_id=runs[index].pk)
        if index < len(rated):
            run_feedback(user=alice, run_id=rated[index].pk, score=1 if index % 2 else -1)

    in_threads(50, end_or_rate)

    profile = the_profile(alice)
    assert profile.invocations == 75
    assert len(profile.window) == 75
    assert sorted(entry["run_id"] for entry in profile.window) == sorted(run.pk for run in [*runs, *rated])
    assert profile.tool_usage == {
        "tracker_task_list": {"success": 50, "failure": 0}, "tracker_project_delete": {"success": 0, "failure": 50},
    }
    assert profile.intent_affinity == {"tracker_project_delete": 50, "conversation": 25}
    scores = [entry.get("quality_score") for entry in profile.window if entry["run_id"] in {r.pk for r in rated}]
    assert sorted(scores) == [0.0] * 13 + [1.0] * 12
    stamps = [entry["timestamp"] for entry in profile.window]
    assert stamps == sorted(stamps)


def blocked_by_this_session() -> bool:
    """Another session waits for a lock this session holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))")
        return bool(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_the_window_is_in_time_order_when_a_recording_waits_for_the_lock(alice: Any) -> None:
    """An entry's time is when it got the profile, not when it started waiting for it."""
    profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": 0})
    started = threading.Event()

    def record_late() -> None:
        try:
            started.set()
            profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": 2})
        finally:
            connection.close()

    with transaction.atomic():
        AgentProfile.objects.select_for_update().get(owner=alice)  # another recording holds the profile
        waiter = threading.Thread(target=record_late)
        waiter.start()
        started.wait(5)
        # It waits for the lock: its session is the one this transaction blocks.
        wait_for(blocked_by_this_session, what="the later recording to wait for the profile's lock")
        assert waiter.is_alive()
        profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": 1})
    waiter.join(10)
    window = the_profile(alice).window
    assert [entry["run_id"] for entry in window] == [0, 1, 2]
    assert [entry["timestamp"] for entry in window] == sorted(entry["timestamp"] for entry in window)


def test_a_profile_that_cannot_be_written_never_keeps_a_run_from_ending_and_the_sweeper_files_it_later(
    alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": 0})
    AgentProfile.objects.filter(owner=alice).update(tool_usage=["not", "an", "object"])  # a hand-edited row
    run, _pending = waiting_run(alice)

    run_cancel(user=alice, run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled"  # ended all the same
    assert run.profile_recorded_at is None
    assert "Could not record run" in caplog.text
    assert the_profile(alice).invocations == 1
    sweep_runs()  # still unwritable: still not filed, and still owed
    assert the_profile(alice).invocations == 1

    AgentProfile.objects.filter(owner=alice).update(tool_usage={})  # repaired
    sweep_runs()
    sweep_runs()
    assert [entry["run_id"] for entry in the_profile(alice).window] == [0, run.pk]
    assert entries_for(alice, run)[0]["status"] == "cancelled"
    run.refresh_from_db()
    assert run.profile_recorded_at is not None
