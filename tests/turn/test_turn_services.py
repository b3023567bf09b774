"""Services and the sweeper without a worker: rate limits, the stuck-run sweep, the registry record."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from assistant.conversation.services import Refused, chat_send
from assistant.models import AgentChat, AgentRun
from assistant.turn.sweeper import sweep_runs
from registry.models import AgentProfile
from registry.selectors import profile_summary
from registry.services import profile_record_invocation
from registry.stats import compute_stats
from tests.conftest import assistant_settings_with

pytestmark = pytest.mark.django_db


def test_each_person_has_a_rate_limit_of_their_own(alice: Any, bob: Any) -> None:
    with assistant_settings_with(RUNS_PER_MINUTE=2):
        chat_send(user=alice, content="one", new_chat=True)
        chat_send(user=alice, content="two", new_chat=True)
        with pytest.raises(Refused) as refused:
            chat_send(user=alice, content="three", new_chat=True)
        assert refused.value.code == "rate_limited"
        chat_send(user=bob, content="bob is not affected")
    assert AgentRun.objects.filter(owner=alice).count() == 2


def test_sending_without_a_chat_continues_the_current_one_and_new_chat_starts_another(alice: Any) -> None:
    first = chat_send(user=alice, content="hello").chat
    AgentRun.objects.filter(chat=first).update(status="succeeded")
    assert chat_send(user=alice, content="again").chat == first
    AgentRun.objects.filter(chat=first).update(status="succeeded")
    other = chat_send(user=alice, content="fresh start", new_chat=True).chat
    assert other != first and other.title == "fresh start"


def test_the_sweeper_times_out_stuck_runs_and_requeues_runs_of_dead_workers(alice: Any) -> None:
    chat = AgentChat.objects.create(owner=alice)
    long_ago = timezone.now() - timedelta(hours=1)
    stuck = AgentRun.objects.create(owner=alice, chat=chat, status="running", config={"max_wall_seconds": 120},
                                    clock_started_at=long_ago, started_at=long_ago,
                                    lease_expires_at=timezone.now() - timedelta(seconds=1))
    orphan = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="running",
                                     config={"max_wall_seconds": 120}, clock_started_at=timezone.now(),
                                     lease_expires_at=timezone.now() - timedelta(seconds=1))
    healthy = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="running",
                                      clock_started_at=timezone.now(),
                                      lease_expires_at=timezone.now() + timedelta(seconds=10))
    # Created long ago, but queued again just now when its confirmation was answered: its message is fresh.
    just_confirmed = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), status="queued",
                                             clock_started_at=timezone.now())
    AgentRun.objects.filter(pk=just_confirmed.pk).update(created_at=long_ago)
    swept = sweep_runs()
    assert swept == {"requeued": [orphan.pk], "timed_out": [stuck.pk]}
    stuck.refresh_from_db()
    assert (stuck.status, stuck.stop_reason) == ("timed_out", "swept")
    healthy.refresh_from_db()
    assert healthy.status == "running"


def entry(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, "duration_ms": 100, "tool_calls": 1, "tool_errors": 0, "tools_used": ["t"], **extra}


def test_the_profile_keeps_the_last_hundred_invocations_and_counts_them_all(alice: Any) -> None:
    for number in range(105):
        profile_record_invocation(owner=alice, spec_name="default", entry=entry("success", run_id=number))
    profile = AgentProfile.objects.get(owner=alice)
    assert profile.invocations == 105
    assert len(profile.window) == 100
    assert profile.window[0]["run_id"] == 5
    assert profile.tool_usage == {"t": {"success": 105, "failure": 0}}


def test_trend_and_summary_line(alice: Any) -> None:
    assert profile_summary(owner=alice, spec_name="default") == ""
    for status in ["error", "error", "success", "success"]:
        profile_record_invocation(owner=alice, spec_name="default", entry=entry(status))
    stats = compute_stats(AgentProfile.objects.get(owner=alice).window)
    assert (stats.success_rate, stats.trend, stats.sample_size) == (0.5, 1.0, 4)
    assert profile_summary(owner=alice, spec_name="default") == (
        'Agent "default" — 4 prior invocations, 50% success rate, ↑ 100% trend. Top tools: t.'
    )


def test_an_unknown_invocation_status_is_refused(alice: Any) -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        profile_record_invocation(owner=alice, spec_name="default", entry=entry("great"))
    assert not AgentProfile.objects.exists()
