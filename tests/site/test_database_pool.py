"""A burst of requests leaves the site serving, and a database restart costs it nothing.

Under daphne each request runs in a thread of its own, and Django keeps a database connection per thread:
with persistent connections, 100 requests at once to any page left 100 PostgreSQL backends open for up to
a minute, the server refused everyone else ("too many clients already"), /healthz answered 503 and signed-in
pages 500. Each process now takes its connections from one bounded pool (config/settings.py). These tests
send real concurrent requests (threads, loopback) to the daphne `make run` starts, on the real PostgreSQL,
and count that daphne's backends on the server while the burst lasts and after it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import websockets
from django.conf import settings
from django.db import connection
from django.test import Client

from assistant.models import AgentRun
from tests.conftest import (
    WorkerProcess,
    _test_database_url,
    daphne_on_test_database,
    site_worker,
    stop_every_sweeper,
    wait_for,
    wait_for_run,
)

pytestmark = pytest.mark.django_db(transaction=True)

#: The test's daphne may hold this many connections; the burst is 25 times as many requests.
POOL_SIZE = 4
BURST = 100
#: Every connection the test's daphne opens carries this name, so its backends can be told from the others'.
WEB_NAME = "assistant-pool-test-web"
#: Generous waits for answers: a loaded machine may serve 100 requests through 4 connections slowly, and
#: what is tested is what the burst leaves behind, not how fast it is served.
PATIENCE_SECONDS = 120.0


class Backends:
    """PostgreSQL's own count of the sessions open on the test database, from a connection of the test's."""

    def __init__(self) -> None:
        params = connection.get_connection_params()
        for key in ("dbname", "cursor_factory", "context"):
            params.pop(key, None)
        self.database = connection.settings_dict["NAME"]
        # The server's maintenance database: this connection is not one of those it counts.
        self.admin = psycopg.connect(**params, dbname="postgres", autocommit=True)

    def count(self, application_name: str | None = None) -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
        args: list[Any] = [self.database]
        if application_name is not None:
            query += " AND application_name = %s"
            args.append(application_name)
        row = self.admin.execute(query, args).fetchone()
        return int(row[0]) if row else 0

    def cut(self, application_name: str) -> int:
        """End those sessions, as a database restart ends every session; returns how many it ended."""
        row = self.admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = %s",
            [self.database, application_name],
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.admin.close()


@pytest.fixture
def backends() -> Iterator[Backends]:
    counter = Backends()
    yield counter
    counter.close()


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: Any) -> Iterator[int]:
    """`make run`'s daphne on the test database with a pool of POOL_SIZE; yields its port. Requests that find
    the pool busy wait for a connection rather than give up, however slow the machine."""
    env = {"DATABASE_POOL_MAX_SIZE": str(POOL_SIZE), "DATABASE_POOL_TIMEOUT": str(PATIENCE_SECONDS),
           "PGAPPNAME": WEB_NAME}
    with daphne_on_test_database(django_db_blocker, env=env) as port:
        yield port


def session_cookie(user: Any) -> str:
    """A real session for `user` in the database, as signing in through the form leaves one."""
    client = Client()
    client.force_login(user)
    return str(client.cookies[settings.SESSION_COOKIE_NAME].value)


def get(port: int, path: str, session: str | None = None) -> int:
    """One GET on a connection of its own, as a browser's; the status, or the reason there was none."""
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_SECONDS)
    try:
        client.request("GET", path, headers={"Cookie": f"sessionid={session}"} if session else {})
        response = client.getresponse()
        response.read()
        return response.status
    finally:
        client.close()


def burst(port: int, path: str, session: str | None, backends: Backends, name: str = WEB_NAME
          ) -> tuple[Counter[Any], int]:
    """BURST requests for `path` at once, each from a thread of its own; returns their answers and the most
    backends the daphne whose connections are named `name` held on the database while they were served."""
    answers: list[Any] = []
    start = threading.Barrier(BURST)

    def request() -> None:
        start.wait()
        try:
            answers.append(get(port, path, session))
        except OSError as exc:  # no answer at all (reset, refused, timed out): counted as such
            answers.append(type(exc).__name__)

    threads = [threading.Thread(target=request, daemon=True) for _ in range(BURST)]
    for thread in threads:
        thread.start()
    peak = 0
    deadline = time.monotonic() + PATIENCE_SECONDS
    while any(thread.is_alive() for thread in threads) and time.monotonic() < deadline:
        peak = max(peak, backends.count(name))
        time.sleep(0.01)
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), f"requests still unanswered: {Counter(answers)}"
    return Counter(answers), max(peak, backends.count(name))


PAGES = {
    "/healthz, signed out": ("/healthz", False),
    "the home page": ("/", True),
    "a tracker page": ("/tracker/tasks/", True),
    "the assistant's page": ("/assistant/", True),
}


@pytest.mark.worker
@pytest.mark.parametrize(("path", "signed_in"), list(PAGES.values()), ids=list(PAGES))
def test_a_burst_of_requests_holds_no_more_connections_than_the_pool_and_leaves_the_site_serving(
    web: int, alice: Any, celery_worker: WorkerProcess, backends: Backends, path: str, signed_in: bool
) -> None:
    session = session_cookie(alice)
    assert get(web, "/healthz") == 200  # the worker answers: /healthz can say 200 at all

    answers, peak = burst(web, path, session if signed_in else None, backends)

    assert answers == Counter({200: BURST}), answers
    assert peak <= POOL_SIZE, f"daphne held {peak} backends for a pool of {POOL_SIZE} ({backends.count()} in all)"
    # What the burst left behind: still within the pool, and the site answers at once, signed in or not.
    assert backends.count(WEB_NAME) <= POOL_SIZE
    assert get(web, "/healthz") == 200
    assert get(web, "/tracker/tasks/", session) == 200
    assert backends.count(WEB_NAME) <= POOL_SIZE


def test_sockets_opened_and_closed_one_after_another_hand_their_connections_back(web: int, alice: Any) -> None:
    """Each socket reads the database as it opens (its session and person) and for what it is asked. Three
    times as many sockets as the pool holds, one after another: had each kept its connection once closed, the
    pool would be spent by the fifth, which would wait for one in vain."""
    session = session_cookie(alice)

    async def one_socket() -> dict[str, Any]:
        async with websockets.connect(f"ws://127.0.0.1:{web}/ws/assistant/", open_timeout=PATIENCE_SECONDS,
                                      additional_headers={"Cookie": f"sessionid={session}",
                                                          "Origin": f"http://127.0.0.1:{web}"}) as tab:
            await tab.send(json.dumps({"type": "assistant.chats"}))
            return dict(json.loads(await asyncio.wait_for(tab.recv(), PATIENCE_SECONDS)))

    for _ in range(POOL_SIZE * 3):
        assert asyncio.run(one_socket())["type"] == "assistant.chats_listed"
    assert get(web, "/tracker/tasks/", session) == 200


def timed_get(port: int, path: str, session: str) -> float:
    started = time.perf_counter()
    assert get(port, path, session) == 200
    return time.perf_counter() - started


def test_a_database_restart_right_after_a_burst_costs_the_next_request_nothing(
    django_db_blocker: Any, alice: Any, backends: Backends
) -> None:
    """A restart ends every connection of the pool. Each is checked before it is handed out, so no request
    fails on one ("the connection is closed"); and the first one found dead sends all the others through
    the check at once (config/postgresql). psycopg_pool alone checks the next ones one by one, pausing 1,
    2, 4, 8... s between them: after a burst had filled a pool of 6, the next request took 28 s (against
    0.01 s before the restart); with a pool of 10 and the default timeout, it failed."""
    name = "assistant-pool-test-restart"
    session = session_cookie(alice)
    env = {"PGAPPNAME": name, "DATABASE_POOL_MAX_SIZE": "6", "DATABASE_POOL_TIMEOUT": str(PATIENCE_SECONDS)}
    with daphne_on_test_database(django_db_blocker, env=env) as port:
        path = "/tracker/tasks/"
        answers, _ = burst(port, path, session, backends, name)
        assert answers == Counter({200: BURST}), answers
        # What the same request costs on the same server, its pool full of connections that work.
        usual = max(timed_get(port, path, session) for _ in range(5))

        cut = backends.cut(name)
        assert cut >= 3, f"the burst left {cut} connections in the pool: too few to tell"

        after = timed_get(port, path, session)
        assert after < 20 * usual, f"{after:.3f} s after the restart, against {usual:.3f} s at most before"
        assert get(port, "/assistant/", session) == 200


# --- Celery's prefork pool: a new pool process never shares its parent's connections -------------------


def _pool_processes(worker: WorkerProcess) -> list[int]:
    from config.celery import app

    host = f"{worker.name}@{socket.gethostname()}"
    stats = (app.control.inspect(destination=[host], timeout=5).stats() or {}).get(host)
    return list(stats["pool"]["processes"]) if stats else []


def _swept() -> None:
    """Until the worker's main process has finished a whole sweep (database included) after this moment:
    each sweep stamps a heartbeat in Redis before it sweeps, so the second stamp seen comes after one
    whole sweep."""
    from assistant.infra.redis_connection import redis_client
    from assistant.operations.health import SWEEPER_HEARTBEAT_KEY

    client = redis_client()
    for _ in range(2):
        client.delete(SWEEPER_HEARTBEAT_KEY)
        wait_for(lambda: client.get(SWEEPER_HEARTBEAT_KEY), timeout=PATIENCE_SECONDS, what="the next sweep")


@pytest.mark.worker
def test_a_pool_process_forked_after_the_main_process_used_the_database_works_on_connections_of_its_own(
    django_db_blocker: Any, alice: Any, backends: Backends
) -> None:
    """The main process sweeps the database every half second (the fault suite's settings), so its
    connection pool is open when a pool process dies and Celery forks a new one. The new one must not
    take its parent's pool: it runs turns, the main process goes on sweeping without an error, and the
    worker holds no more connections than its processes use (two per pool process, one in the main)."""
    from assistant.conversation.services import chat_send

    stop_every_sweeper()  # this test's worker is the only one on the test database
    name = "assistant-pool-test-worker"
    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": _test_database_url(), "DJANGO_SETTINGS_MODULE": "tests.faults.settings",
               "PGAPPNAME": name, "ASSISTANT_MODEL": "offline"}
    worker = site_worker(env, f"pool-worker-{os.getpid()}")
    worker.start()
    try:
        log_start = worker.log.stat().st_size
        wait_for(lambda: backends.count(name) >= 1, timeout=PATIENCE_SECONDS, what="the main process's sweep")
        for number in range(2):
            run = chat_send(user=alice, content="what are my open tasks?", new_chat=True).run
            assert wait_for_run(run.pk, *AgentRun.ENDED_STATUSES).status == "succeeded", number

        before = _pool_processes(worker)
        assert len(before) == 2, before
        os.kill(before[0], signal.SIGKILL)
        wait_for(lambda: len(set(_pool_processes(worker)) - set(before)) == 1, timeout=PATIENCE_SECONDS,
                 what="Celery to fork a new pool process")

        _swept()
        for number in range(4):  # enough for both pool processes, the new one among them
            run = chat_send(user=alice, content="what are my open tasks?", new_chat=True).run
            assert wait_for_run(run.pk, *AgentRun.ENDED_STATUSES).status == "succeeded", number
        _swept()

        log = worker.log.read_bytes()[log_start:].decode(errors="replace")
        assert "Run sweep failed" not in log, log[-4000:]
        assert "database pool before a fork" not in log, log[-4000:]
        assert backends.count(name) <= 2 * 2 + 1
    finally:
        worker.stop()
