"""One worker for the whole package, its model the package's script file (the harness rewrites it for each run, so
the members a worker starts follow the case's script too); one daphne for the AG-UI module. The cases of a module
run once, in sequence, in a module fixture (`run_cases`); each test then asserts on one case's outcome."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.conftest import WorkerProcess, _test_database_url, site_worker, stop_every_sweeper
from tests.injection.cases import Case
from tests.injection.harness import Harness, Outcome, report, write_script


@pytest.fixture(scope="package")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("injection-model") / "script.json"
    write_script(path, [{"text": "No script was set for this run."}])
    return path


@pytest.fixture(scope="package")
def injection_worker(django_db_setup: None, django_db_blocker: Any, model_path: Path) -> Iterator[WorkerProcess]:
    """The only worker on the test database while the package runs (the suite's own is stopped: it would take
    runs with another model); `celery_worker` starts the suite's again for the tests that need it."""
    from assistant.infra.redis_connection import redis_client
    from config.celery import app

    stop_every_sweeper()
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    app.control.purge()
    client = redis_client()
    for key in client.scan_iter("assistant:*"):
        client.delete(key)
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "ASSISTANT_MODEL": f"scripted:{model_path}"}
    worker = site_worker(env, f"injection-worker-{os.getpid()}")
    worker.start()
    yield worker
    worker.stop()


@contextmanager
def people(django_db_blocker: Any) -> Iterator[tuple[Any, Any]]:
    """alice and bob, committed for the worker and daphne to see; the database is emptied after, as a
    transactional test leaves it."""
    with django_db_blocker.unblock():
        model = get_user_model()
        alice = model.objects.create_user(username="alice", password="pw")
        bob = model.objects.create_user(username="bob", password="pw")
        try:
            yield alice, bob
        finally:
            call_command("flush", interactive=False, verbosity=0)


def run_cases(django_db_blocker: Any, worker: WorkerProcess, model_path: Path, cases: Iterable[Case],
              channels: Any) -> dict[str, Outcome]:
    """Every case in sequence; `channels(alice)` makes the channels (name → channel) for alice."""
    with people(django_db_blocker) as (alice, bob):
        opened = channels(alice)
        try:
            outcomes = Harness(person=alice, other=bob, script_path=model_path, channels=opened).run(cases)
        finally:
            for channel in opened.values():
                channel.close()
            worker.wait_idle()
    print("\n" + report(outcomes))
    return {outcome.case.id: outcome for outcome in outcomes}
