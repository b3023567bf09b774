"""Every member run is filed once in its own spec's profile, however many end at the same time: 50 member
runs over three members, worked by the real worker's two processes at once, give exact counts."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from assistant.infra.worker_queue import run_enqueue
from assistant.models import AgentChat, AgentRun
from assistant.runs.lifecycle import run_child_start, run_config
from assistant.testing.providers.openai_server import FakeOpenAIServer, openai_stream
from registry.models import AgentProfile
from tests.conftest import WorkerProcess, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

MEMBERS = ("test-viewer", "test-clerk", "test-keeper")
CHILDREN, PER_PARENT = 50, 5


def test_fifty_member_runs_ending_together_are_each_filed_once_in_their_own_profile(
    alice: Any, celery_worker: WorkerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.queue(*[openai_stream(["Done."]) for _ in range(CHILDREN)])
    children: list[AgentRun] = []
    with transaction.atomic():
        for number in range(CHILDREN // PER_PARENT):
            chat = AgentChat.objects.create(owner=alice, spec="test-asker", title=f"chat {number}")
            # A top run another worker holds (its wake-up is not what this test is about).
            parent = AgentRun.objects.create(owner=alice, chat=chat, spec="test-asker", status="running",
                                             lease_owner="elsewhere", config=run_config(spec="test-asker"),
                                             started_at=timezone.now(), clock_started_at=timezone.now())
            for index in range(PER_PARENT):
                spec = MEMBERS[len(children) % len(MEMBERS)]
                child = run_child_start(parent=parent, spec=spec, task=f"Task {len(children)}.",
                                        sharing=PER_PARENT - index)
                children.append(child)
        for child in children:
            run_enqueue(child.pk)

    ids = [child.pk for child in children]
    wait_for(lambda: not AgentRun.objects.filter(pk__in=ids, status__in=AgentRun.ACTIVE_STATUSES).exists(),
             timeout=90, what="every member run to end")
    assert set(AgentRun.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    for spec in MEMBERS:
        expected = sorted(child.pk for child in children if child.spec == spec)
        window = AgentProfile.objects.get(owner=alice, spec_name=spec).window
        assert sorted(entry["run_id"] for entry in window) == expected  # each once, none missing
        assert {entry["asked_by"] for entry in window} == {"test-asker"}
    counts = {spec: len(AgentProfile.objects.get(owner=alice, spec_name=spec).window) for spec in MEMBERS}
    assert counts == {"test-viewer": 17, "test-clerk": 17, "test-keeper": 16}
