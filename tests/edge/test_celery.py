from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from assistant.tasks import health_check


@pytest.mark.worker
def test_a_task_round_trips_through_the_real_broker_and_worker(celery_worker: Any) -> None:
    nonce = uuid.uuid4().hex
    result = health_check.delay(nonce).get(timeout=20)
    assert result["nonce"] == nonce
    # It ran in the worker process, not eagerly in this one.
    assert result["pid"] != os.getpid()


def test_tasks_are_acknowledged_late_and_requeued_when_the_worker_dies() -> None:
    from config.celery import app

    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    # Redis redelivers an unacknowledged task after the visibility timeout: it must outlast a run.
    assert app.conf.broker_transport_options["visibility_timeout"] > app.conf.task_time_limit
    assert app.conf.task_soft_time_limit < app.conf.task_time_limit


@pytest.mark.django_db(transaction=True)
def test_a_task_run_eagerly_inside_a_transaction_leaves_that_transaction_open() -> None:
    """A host's tests often run tasks eagerly, in the caller's thread and transaction. The re-check of
    connections around each task must leave those alone, or the caller's transaction dies with them."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    with transaction.atomic():
        get_user_model().objects.create_user("eager")
        assert health_check.apply(args=["eager"]).get()["nonce"] == "eager"
        assert connection.in_atomic_block
        assert get_user_model().objects.filter(username="eager").exists()
    assert get_user_model().objects.filter(username="eager").exists()
