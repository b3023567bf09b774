"""/healthz is public for load balancers: an anonymous caller learns the status and nothing else, and
however often it is asked, the workers are pinged at most once per period."""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from assistant.operations.health import forget_worker_check
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
    assert detailed_parts(details) == {"database", "redis", "worker", "tools"}
    assert details["worker"]["workers"]
    assert details["tools"] == {"ok": True}  # the worker offers the tools this code declares

    with assistant_settings_with(HEALTH_TOKEN=TOKEN):
        with_token = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
        assert with_token["worker"]["workers"] == details["worker"]["workers"]
        assert Client().get("/healthz", HTTP_AUTHORIZATION="Bearer wrong").json() == {"ok": True}
    # No token configured: no header opens the details.
    assert Client().get("/healthz", HTTP_AUTHORIZATION="Bearer ").json() == {"ok": True}


class PingCounter:
    """Counts the ping broadcasts that reach this test's broker (Celery's control messages are a Redis
    fanout, published on a channel named after the broker's database)."""

    def __init__(self) -> None:
        self.pings = 0
        self._client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        # Pub/Sub channels are shared by every database of a Redis server: other test sessions' broadcasts
        # go by on the same server, under their own database's prefix (kombu's fanout prefix).
        database = self._client.connection_pool.connection_kwargs.get("db", 0)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        self._marker_channel = f"test-healthz-settled-{uuid.uuid4().hex}"
        self._pubsub.subscribe(f"/{database}.celery.pidbox", self._marker_channel)
        self._marks: queue.Queue[bytes] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()
        self.settled()  # subscribed: nothing published from now on is missed

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.1)
            if message is None:
                continue
            if message["channel"].decode() == self._marker_channel:
                self._marks.put(message["data"])
                continue
            envelope = json.loads(message["data"])
            command = json.loads(base64.b64decode(envelope["body"]))
            if command.get("method") == "ping":
                self.pings += 1

    def settled(self) -> int:
        """The pings so far, once every broadcast published before this call has been counted: Redis hands
        a subscriber its messages in the order they were published, so a marker published now comes after
        them."""
        mark = uuid.uuid4().hex.encode()
        self._client.publish(self._marker_channel, mark)
        while self._marks.get(timeout=10) != mark:
            pass
        return self.pings

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._pubsub.close()
        self._client.close()


# Far longer than the hits below take, even on a busy machine: they all fall within one period.
LONG_PERIOD_SECONDS = 60.0
# Redis keeps the cached answer for whole seconds.
SHORT_PERIOD_SECONDS = 1.0


@pytest.mark.worker
def test_many_hits_ping_the_workers_at_most_once_per_period(celery_worker: Any) -> None:
    counter = PingCounter()
    try:
        with assistant_settings_with(HEALTH_WORKER_CHECK_SECONDS=LONG_PERIOD_SECONDS):
            started = time.monotonic()
            for _ in range(25):
                assert Client().get("/healthz").status_code == 200
            assert time.monotonic() - started < LONG_PERIOD_SECONDS, "the hits outlasted the period"
            assert counter.settled() == 1

        forget_worker_check()
        with assistant_settings_with(HEALTH_WORKER_CHECK_SECONDS=SHORT_PERIOD_SECONDS):
            assert Client().get("/healthz").status_code == 200
            assert counter.settled() == 2
            time.sleep(SHORT_PERIOD_SECONDS + 0.1)  # the period is over: the next hit asks the workers again
            assert Client().get("/healthz").status_code == 200
            assert counter.settled() == 3
    finally:
        counter.close()
