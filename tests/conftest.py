"""Shared fixtures. Tests talk to the real PostgreSQL, Redis and Celery worker that `make test` provides."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client

from assistant.testing.providers.openai_server import FakeOpenAIServer
from assistant.testing.scripted import write_script
from assistant.testing.worker import WorkerProcess
from devstack.commands import daphne_command

PROJECT_DIR = Path(__file__).resolve().parent.parent

# The browser fixtures (Chromium, daphne on the test database, the scripted model's script): for tests/browser/,
# and for the browser test the security suite keeps with the rest of its case (tests/security/test_events_bounded.py).
pytest_plugins = ["tests.browser.harness"]


def pytest_configure(config: pytest.Config) -> None:
    # Channels runs database work in executor threads; persistent connections there would outlive
    # the test and keep the test database from being dropped.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0

_usernames = itertools.count(1)


def _connections_held_elsewhere() -> int:
    """How many of this test process's pooled database connections are out of its pool, but the test thread's
    own (0 before the process has a pool)."""
    own = connections["default"]
    pool = type(own)._connection_pools.get(own.alias)  # `own.pool` would open one
    if pool is None:
        return 0
    stats = pool.get_stats()
    # A change of TIME_ZONE or USE_TZ gives the process a new pool: a connection of the old one is not counted.
    own_out = own.connection is not None and getattr(own.connection, "_pool", None) is pool
    return stats["pool_size"] - stats["pool_available"] - own_out


@pytest.fixture(autouse=True)
def no_database_connection_left_out() -> Iterator[None]:
    """A test hands back every database connection it took but its own thread's. One that no code can reach
    any more (its thread ended, or the context Django kept it in is gone) is out of the pool for good: ten
    such, in whichever tests a process happens to run, and a later test's page waits for one until the
    pool's timeout, then fails far from the test that took them."""
    before = _connections_held_elsewhere()
    yield
    # The one thread that runs thread-sensitive database work outside any async_to_sync (a test's event loop's
    # sockets) keeps its connection between calls, as a request thread would: reachable, and handed back here.
    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=settings.DATABASE_POOL_TIMEOUT)
    deadline = time.monotonic() + settings.DATABASE_POOL_TIMEOUT
    while (held := _connections_held_elsewhere()) > before and time.monotonic() < deadline:
        time.sleep(0.05)  # a request still being answered hands its connection back as it ends
    assert held <= before, (
        f"the test left {held - before} database connection(s) out of the pool for good ({held} besides the "
        f"test thread's, {before} before it): code that used the database in a thread or context that ended "
        "never closed them"
    )


@pytest.fixture
def user_factory(db: None) -> Callable[..., Any]:
    """Makes users; each call a new one unless `username` is given. Password is always `pw`."""

    def make(username: str | None = None, **fields: Any) -> Any:
        name = username or f"user{next(_usernames)}"
        return get_user_model().objects.create_user(username=name, password="pw", **fields)

    return make


@pytest.fixture
def alice(user_factory: Callable[..., Any]) -> Any:
    return user_factory("alice")


@pytest.fixture
def bob(user_factory: Callable[..., Any]) -> Any:
    return user_factory("bob")


@pytest.fixture
def auth_client(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def _test_database_url() -> str:
    """The configured DATABASE_URL, pointed at the test database pytest-django created."""
    parts = urlsplit(settings.DATABASE_URL)
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def site_worker(env: dict[str, str], name: str, log: Path | None = None) -> WorkerProcess:
    """A worker of this repository's site (`celery -A config`, run from the checkout) named `name`, logging to
    .data/<name>.log unless told where; `env` names its database and broker."""
    return WorkerProcess("config", env, name, log or PROJECT_DIR / ".data" / f"{name}.log", cwd=PROJECT_DIR)


@pytest.fixture(scope="session")
def session_openai() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible server that the test worker reaches as its `openai` provider."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fake_openai(session_openai: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The worker's fake provider, with no queued replies or recorded requests from earlier tests, and
    no breaker or skip mark left in Redis by them."""
    from assistant.infra.redis_connection import redis_client

    client = redis_client()
    for key in client.scan_iter("assistant:*"):
        client.delete(key)
    session_openai.reset()
    yield session_openai


def stop_every_sweeper() -> None:
    """Stop every worker of this session that sweeps the test database, the suite's and the fault stack's
    (`celery_worker` and the fault suite's `stack` start theirs again when a test needs it)."""
    WorkerProcess.stop_all()


@pytest.fixture
def celery_worker(session_worker: WorkerProcess) -> Iterator[WorkerProcess]:
    """The real worker, left idle when the test ends; a test may kill and restart it.

    It is the only worker on the test database while the test runs: the fault suite's own worker (see
    tests/faults/conftest.py) sweeps the same database, and would take this test's runs onto its own broker
    and channel layer. Likewise a fault test pauses this one, so it is started again if it rests."""
    yield the_only_worker(session_worker)
    session_worker.wait_idle()


def the_only_worker(session_worker: WorkerProcess) -> WorkerProcess:
    """The suite's worker, running, and the only one on the test database: a fault test in the same test
    process stops it and starts a worker of its own (see `celery_worker`)."""
    WorkerProcess.stop_all(keep=session_worker)
    if session_worker not in WorkerProcess.running:
        session_worker.start()
    return session_worker


@pytest.fixture(scope="session")
def session_worker(
    django_db_setup: None, django_db_blocker: Any, session_openai: FakeOpenAIServer
) -> Iterator[WorkerProcess]:
    """The worker the run-loop tests share, started once."""
    from config.celery import app

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "OPENAI_BASE_URL": session_openai.base_url, "OPENAI_API_KEY": "test-key"}
    # Leftovers from an aborted run would be delivered to this worker against a fresh database, and an
    # earlier session's cancel flags (keyed by run id, which starts again at 1) would stop this one's runs.
    app.control.purge()
    from assistant.infra.redis_connection import redis_client

    client = redis_client()
    for key in client.scan_iter("assistant:*"):
        client.delete(key)
    worker = site_worker(env, f"test-worker-{os.getpid()}")
    worker.start()
    yield worker
    worker.stop()
    with django_db_blocker.unblock():
        _wait_for_other_sessions_to_leave()


def log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_for_other_sessions_to_leave(timeout: float = 5) -> None:
    """PostgreSQL ends a closed session's backend a moment after the client goes; dropping the test
    database before that fails with "being accessed by other users"."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.1)
        # Whatever is still connected is a leftover thread's idle connection: end it so the drop works.
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )



def daphne_log_path() -> Path:
    """Where the daphne servers this test process starts write what they log (a server error's traceback)."""
    return PROJECT_DIR / ".data" / f"test-daphne-{os.getpid()}.log"


@contextlib.contextmanager
def daphne_on_test_database(django_db_blocker: Any, *, env: dict[str, str] | None = None) -> Iterator[int]:
    """daphne serving the site (HTTP and websockets) on the test database, with its default limits, as
    `make run` starts it; yields its port. `env` adds to its environment (e.g. ASSISTANT_MODEL)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with django_db_blocker.unblock():
        server_env = {**os.environ, **(env or {}), "DATABASE_URL": _test_database_url(),
                      "DJANGO_SETTINGS_MODULE": "tests.settings"}
    log_path = daphne_log_path()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        server = subprocess.Popen(
            daphne_command(sys.executable, host="127.0.0.1", port=port),
            cwd=PROJECT_DIR, env=server_env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: _accepts(port), timeout=30, what="daphne to listen")
        yield port
    finally:
        stop_process(server)


@pytest.fixture(scope="module")
def port(django_db_setup: None, django_db_blocker: Any) -> Iterator[int]:
    """The port of a daphne serving the site on the test database, once per module (a module that needs it
    started otherwise defines its own `port`)."""
    with daphne_on_test_database(django_db_blocker) as serving:
        yield serving


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True

@pytest.fixture
def script(tmp_path: Path) -> Callable[..., str]:
    """Writes a scripted-model file in the test's folder and returns its model spec, e.g.
    `script({"text": "hi"})` (see `assistant.testing.scripted.write_script`)."""
    return functools.partial(write_script, directory=tmp_path)


def wait_for_run(run_id: int, *statuses: str, timeout: float = 30) -> Any:
    """Poll the database until the run reaches one of `statuses`; returns the run."""
    from assistant.models import AgentRun

    deadline = time.monotonic() + timeout
    while True:
        run = AgentRun.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        if time.monotonic() > deadline:
            steps = [(s.seq, s.kind, s.state, s.tool_name, s.result) for s in run.steps.all()]
            raise AssertionError(f"run {run_id} is {run.status} ({run.error}), not {statuses}; steps: {steps}")
        time.sleep(0.05)


def wait_for(predicate: Callable[[], Any], *, timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def assistant_settings_with(**values: Any) -> Any:
    """override_settings for some ASSISTANT keys, keeping the suite's others."""
    from django.test import override_settings

    return override_settings(ASSISTANT={**settings.ASSISTANT, **values})
