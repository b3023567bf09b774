"""/healthz is public for load balancers: an anonymous caller learns the status and nothing else, and
however often it is asked, the workers are pinged at most once per period."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from assistant.health import forget_worker_check
from tests.conftest import WorkerProcess, assistant_settings_with

pytestmark = pytest.mark.django_db

TOKEN = "health-token-for-tests"


@pytest.fixture(autouse=True)
def fresh_worker_check() -> Iterator[None]:
    """No worker check remembered from an earlier test (they share the cache)."""
    forget_worker_check()
    yield
    forget_worker_check()


def detailed_parts(body: dict[str, Any]) -> set[str]:
    return set(body) - {"ok"}


@pytest.fixture
def no_worker() -> Iterator[None]:
    """No worker answers: the suite's worker, if an earlier test started it, rests for this test."""
    paused = list(WorkerProcess.running)
    for worker in paused:
        worker.stop()
    yield
    for worker in paused:
        worker.start()


def test_without_a_worker_anonymous_callers_get_the_status_and_staff_the_reason(
    no_worker: None, user_factory: Any
) -> None:
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"ok": False}  # no exception text, no host names

    staff = Client()
    staff.force_login(user_factory(is_staff=True))
    response = staff.get("/healthz")
    assert response.status_code == 503
    details = response.json()
    assert details["database"]["ok"] is True and details["redis"]["ok"] is True
    assert details["worker"] == {"ok": False, "error": "RuntimeError: no Celery worker answered"}


@pytest.mark.worker
def test_anonymous_and_ordinary_users_get_the_status_staff_and_token_holders_the_details(
    celery_worker: Any, user_factory: Any
) -> None:
    anonymous = Client().get("/healthz")
    assert anonymous.status_code == 200
    assert anonymous.json() == {"ok": True}

    person = Client()
    person.force_login(user_factory())
    assert person.get("/healthz").json() == {"ok": True}

    staff = Client()
    staff.force_login(user_factory(is_staff=True))
    details = staff.get("/healthz").json()
    assert detailed_parts(details) == {"database", "redis", "worker"}
    assert details["worker"]["workers"]

    with assistant_settings_with(HEALTH_TOKEN=TOKEN):
        with_token = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
        assert with_token["worker"]["workers"] == details["worker"]["workers"]
        assert Client().get("/healthz", HTTP_AUTHORIZATION="Bearer wrong").json() == {"ok": True}
    # No token configured: no header opens the details.
    assert Client().get("/healthz", HTTP_AUTHORIZATION="Bearer ").json() == {"ok": True}


class PingCounter:
    """Counts the ping broadcasts that reach the broker (Celery's control messages are a Redis fanout)."""

    def __init__(self) -> None:
        self.pings = 0
        self._client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.psubscribe("*celery.pidbox")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.1)
            if message is None:
                continue
            envelope = json.loads(message["data"])
            command = json.loads(base64.b64decode(envelope["body"]))
            if command.get("method") == "ping":
                self.pings += 1

    def settled(self) -> int:
        time.sleep(0.3)  # let the last broadcast arrive
        return self.pings

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._pubsub.close()
        self._client.close()


@pytest.mark.worker
def test_many_hits_ping_the_workers_at_most_once_per_period(celery_worker: Any) -> None:
    counter = PingCounter()
    try:
        with assistant_settings_with(HEALTH_WORKER_CHECK_SECONDS=2.0):
            started = time.monotonic()
            for _ in range(25):
                assert Client().get("/healthz").status_code == 200
            assert time.monotonic() - started < 2.0, "the hits took longer than one period; the count means nothing"
            assert counter.settled() == 1

            time.sleep(2.1)  # the period is over: the next hit asks the workers again
            assert Client().get("/healthz").status_code == 200
            assert counter.settled() == 2
    finally:
        counter.close()
