"""Several workers sweep for lost runs at the same moment: each lost run goes back on the queue once per
lease period in all, not once per worker and sweep. (Which runs count as lost, in one process:
tests/turn/test_turn_services.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from kombu import Connection

from assistant.models import AgentChat, AgentRun
from tests.conftest import PROJECT_DIR, _test_database_url, stop_every_sweeper
from tests.faults.stack import Valkey

pytestmark = pytest.mark.django_db(transaction=True)

LEASE_SECONDS = 3.0  # tests/faults/settings.py


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Valkey]:
    """A broker no worker listens to, so every message the sweepers send stays there to be counted."""
    valkey = Valkey(tmp_path / "valkey")
    valkey.start()
    yield valkey
    valkey.stop()


def queued_run_ids(broker: Valkey) -> list[int]:
    """The run id of every `run_turn` message waiting on the broker, taking them off it."""
    ids = []
    with Connection(broker.url) as connection:
        queue = connection.SimpleQueue("celery")
        while True:
            try:
                message = queue.get(timeout=0.5)
            except queue.Empty:
                break
            assert message.headers["task"] == "assistant.run_turn"
            ids.append(message.payload[0][0])
            message.ack()
        queue.close()
    return ids


def sweepers(broker: Valkey, count: int, *phases: tuple[float, int]) -> list[subprocess.Popen[str]]:
    """`count` sweeping processes, each sweeping in phases of (seconds after the start, sweeps). They start
    together once every one of them is ready: a fixed head start was too short on a busy machine, and
    the phases, begun late, fell into one lease period."""
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "REDIS_URL": broker.url,
           "DJANGO_SETTINGS_MODULE": "tests.faults.settings"}
    arguments = [str(value) for phase in phases for value in phase]
    processes = [
        subprocess.Popen([sys.executable, "-m", "tests.faults.sweep", *arguments], cwd=PROJECT_DIR, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdout is not None and process.stderr is not None
        if process.stdout.readline() != "ready\n":
            raise AssertionError(f"a sweeper did not start: {process.stderr.read()}")
    start = time.time() + 0.2
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(f"{start}\n")
        process.stdin.flush()
    return processes


def finish(processes: list[subprocess.Popen[str]]) -> list[int]:
    said: list[int] = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        said += json.loads(out)
    return said


def test_racing_sweepers_requeue_each_lost_run_once_per_lease_period(alice: Any, broker: Valkey) -> None:
    # Every live worker sweeps this database: the suite's and the fault stack's are stopped here (the
    # next test that needs one starts it again), so the sweeps racing below are the only ones.
    stop_every_sweeper()
    queued_ago = timezone.now() - timedelta(seconds=10)

    def run(**fields: Any) -> AgentRun:
        created = AgentRun.objects.create(owner=alice, chat=AgentChat.objects.create(owner=alice), **fields)
        AgentRun.objects.filter(pk=created.pk).update(created_at=queued_ago)
        return created

    lost = {run(status="queued").pk for _ in range(5)}  # their messages never reached a worker
    working = run(status="running", clock_started_at=timezone.now(),
                  lease_expires_at=timezone.now() + timedelta(minutes=1))

    # Three workers' sweepers start at the same instant and sweep five times each, well within one lease
    # period; then, once the period has passed, five times each again.
    processes = sweepers(broker, 3, (0, 5), (LEASE_SECONDS + 1.0, 5))
    said = finish(processes)

    enqueued = Counter(queued_run_ids(broker))
    assert enqueued == dict.fromkeys(lost, 2), enqueued
    assert Counter(said) == enqueued  # what the sweeps report is what reached the broker
    assert working.pk not in enqueued
    AgentRun.objects.filter(pk__in=lost).update(status="cancelled")  # no worker will ever take them
