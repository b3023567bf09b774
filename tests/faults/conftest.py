"""Fixtures of the fault suite: a whole small site in real processes (see stack.py), and what every
fault test asserts at its end."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.test import Client

from assistant.models import AgentMessage, AgentRun
from assistant.testing.worker import WorkerProcess
from tests.conftest import PROJECT_DIR, _test_database_url, site_worker, wait_for_run
from tests.faults.stack import Daphne, Socket, Valkey

# Every connection the stack's processes open carries this name, so a test can end exactly those.
APPLICATION_NAME = "assistant-fault-stack"
#: The fault stack's specs that hand work round, each with a script of its own.
MEMBER_SPECS = ("fault-lead", "fault-asker", "fault-member", "fault-router", "fault-slow")


class Stack:
    """Valkey, a worker and daphne of the test session's own, on the test database."""

    def __init__(self, directory: Path, database_url: str) -> None:
        self.directory = directory
        self.valkey = Valkey(directory / "valkey")
        self.script_path = directory / "script.json"
        self.script_path.write_text("[]")
        for spec in MEMBER_SPECS:
            self.script_for(spec)
        parts = urlsplit(database_url)
        query = "&".join(filter(None, [parts.query, f"application_name={APPLICATION_NAME}"]))
        self.env = {
            key: value for key, value in os.environ.items()
            if key not in {"CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "ASSISTANT_MODEL"}
        }
        self.env.update(
            DATABASE_URL=urlunsplit(parts._replace(query=query)),
            REDIS_URL=self.valkey.url,
            DJANGO_SETTINGS_MODULE="tests.faults.settings",
            ASSISTANT_MODEL=f"scripted:{self.script_path}",
        )
        self.worker = site_worker(self.env, f"fault-worker-{os.getpid()}", directory / "worker.log")
        self.daphne = Daphne(self.env, directory / "daphne.log")

    @property
    def children(self) -> list[Any]:
        return [self.valkey, self.worker, self.daphne]

    def ensure_running(self) -> None:
        for child in self.children:
            if not child.alive:
                child.start()

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def script(self, *entries: dict[str, Any]) -> None:
        """What the model answers in every run sent from now on (each run replays it from the start)."""
        self.script_path.write_text(json.dumps(list(entries)))

    def script_for(self, spec: str, *entries: dict[str, Any]) -> None:
        """What the model of `spec` (one of MEMBER_SPECS, tests/faults/settings.py) answers from now on."""
        (self.directory / f"{spec}.json").write_text(json.dumps(list(entries)))

    def socket(self, user: Any) -> Socket:
        return Socket(self.daphne.port, session_cookie(user)).connect()

    def wait_for_run(self, run_id: int, timeout: float = 30) -> AgentRun:
        """The run once it has ended; if it does not end in time, the failure says which process died."""
        try:
            return wait_for_run(run_id, *AgentRun.ENDED_STATUSES, timeout=timeout)
        except AssertionError as exc:
            dead = {child.name: child.exit_code() for child in self.children if not child.alive}
            raise AssertionError(f"{exc}\nprocesses dead: {dead}\n--- worker log ---\n"
                                 f"{self.worker.output_since_start()[-3000:]}") from None

    def assert_all_alive(self) -> None:
        dead = {child.name: child.exit_code() for child in self.children if not child.alive}
        assert not dead, f"processes left dead: {dead}\n--- worker log ---\n{self.worker.output_since_start()[-4000:]}"


def session_cookie(user: Any) -> str:
    """A real session for `user` in the database, as logging in through the form would leave."""
    client = Client()
    client.force_login(user)
    return str(client.cookies[settings.SESSION_COOKIE_NAME].value)


@pytest.fixture(scope="session")
def fault_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Stack]:
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    # Beside the suite's other logs, kept after the run for reading; emptied at the start, so no queue
    # from an earlier session is delivered against this session's fresh database.
    # One per test process under pytest-xdist, as each has its own database.
    directory = PROJECT_DIR / ".data" / "-".join(filter(None, ["fault-stack", os.environ.get("PYTEST_XDIST_WORKER")]))
    shutil.rmtree(directory, ignore_errors=True)
    stack = Stack(directory, database_url)
    try:
        stack.ensure_running()
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def stack(fault_stack: Stack) -> Iterator[Stack]:
    """The stack with every process up; at the end, idle, so the test database can be emptied.

    The suite's own worker (if an earlier test started it) sweeps the same database: it would take the
    stack's runs up onto another broker and channel layer, so it rests; `celery_worker` starts it again
    for the next test that needs it."""
    WorkerProcess.stop_all(keep=fault_stack.worker)
    fault_stack.ensure_running()
    # A worker an earlier test killed left its delivery unacknowledged; Redis would hand it out again only
    # after the visibility timeout, in the middle of a later test, for a run whose rows are long gone.
    # Each test starts with no delivery in flight.
    fault_stack.valkey.client().delete("unacked", "unacked_index")
    yield fault_stack
    wait_until_no_run_is_active()


def wait_until_no_run_is_active(timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while AgentRun.objects.filter(status__in=["queued", "running"]).exists():
        if time.monotonic() > deadline:
            raise AssertionError("runs were still active after the test")
        time.sleep(0.1)


def assert_page_matches_database(loaded: dict[str, Any], chat_id: int) -> None:
    """What `assistant.load` shows is exactly what the database holds: every message once, in order,
    and no run shown as active unless one is."""
    assert loaded["chat"]["id"] == chat_id
    shown = [(message["id"], message["role"], message["content"]) for message in loaded["messages"]]
    stored = list(
        AgentMessage.objects.filter(chat_id=chat_id).exclude(role="summary")
        .order_by("created_at", "id").values_list("id", "role", "content")
    )
    assert shown == stored
    active = AgentRun.objects.filter(chat_id=chat_id, status__in=AgentRun.ACTIVE_STATUSES).first()
    assert (loaded["active_run"] or {}).get("id") == (active.pk if active else None)


def assert_one_reply(run: AgentRun, text: str) -> None:
    assert run.status == "succeeded", (run.status, run.stop_reason, run.error)
    replies = AgentMessage.objects.filter(run=run, role="assistant")
    assert [reply.content for reply in replies] == [text]
