"""Shared fixtures. Tests talk to the real PostgreSQL, Redis and Celery worker that `make test` provides."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

PROJECT_DIR = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # Channels runs database work in executor threads; persistent connections there would outlive
    # the test and keep the test database from being dropped.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0

_usernames = itertools.count(1)


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


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: None, django_db_blocker: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker process on the real broker, reading and writing the test database."""
    from config.celery import app

    with django_db_blocker.unblock():
        database_url = _test_database_url()
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings"}
    # Leftovers from an aborted run would be delivered to this worker against a fresh database.
    app.control.purge()
    hostname = f"test-worker-{os.getpid()}@%h"
    log = open(PROJECT_DIR / ".data" / f"test-worker-{os.getpid()}.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", "2",
         "--hostname", hostname, "--without-gossip", "--without-mingle"],
        cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    expected = hostname.replace("%h", "")
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5)
        if any(name.startswith(expected) for reply in replies for name in reply):
            break
        if worker.poll() is not None:
            raise RuntimeError(f"The test Celery worker exited with {worker.returncode}:\n{_tail(log.name)}")
    else:
        stop_process(worker)
        raise RuntimeError(f"The test Celery worker did not answer within 30s:\n{_tail(log.name)}")
    yield worker
    stop_process(worker)
    log.close()
    with django_db_blocker.unblock():
        _wait_for_other_sessions_to_leave()


def _tail(path: str, lines: int = 40) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_for_other_sessions_to_leave(timeout: float = 10) -> None:
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
