"""A worker dies at the worst moment for the registry: the run's end is written and its profile entry is
being written. Both are one transaction, so the run counts once, when it really ends."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from assistant.models import AgentRun
from registry.models import AgentProfile
from registry.services import profile_record_invocation
from tests.conftest import wait_for
from tests.faults.conftest import Stack, assert_one_reply

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Counted once."


def waiting_for_the_profile_lock() -> bool:
    """Some other session waits on a row lock of the profiles table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() "
            "AND query ILIKE %s", ["%registry_agentprofile%"],
        )
        return cursor.fetchone()[0] > 0


def profile_unlocked(owner: Any) -> bool:
    """No transaction holds the person's profile row (a dead worker's has ended: rolled back, as no client is
    left to commit it)."""
    try:
        with transaction.atomic():
            AgentProfile.objects.select_for_update(nowait=True).get(owner=owner)
    except DatabaseError:
        return False
    return True


def test_a_worker_killed_while_filing_its_run_leaves_it_unended_and_it_counts_once(
    alice: Any, stack: Stack
) -> None:
    profile_record_invocation(owner=alice, spec_name="default", entry={"status": "success", "run_id": 0})
    # The first answer's step is written before the end: the run taken up again asks the model once more.
    stack.script({"text": REPLY}, {"text": REPLY})
    locked, release = threading.Event(), threading.Event()

    def hold_the_profile() -> None:
        # Another run of alice's being filed at that moment: it holds her profile's row.
        try:
            with transaction.atomic():
                AgentProfile.objects.select_for_update().get(owner=alice)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_profile)
    holder.start()
    locked.wait(10)
    page = stack.socket(alice)
    run_id = page.send_message("count me once")["run_id"]
    # The worker has written the run's end and waits to file it: now it dies.
    wait_for(waiting_for_the_profile_lock, timeout=20, what="the worker to wait for the profile")
    stack.worker.kill()
    release.set()
    holder.join(10)
    wait_for(lambda: not waiting_for_the_profile_lock(), timeout=10, what="the dead worker's session to end")
    wait_for(lambda: profile_unlocked(alice), timeout=10, what="the dead worker's transaction to end")
    # Its transaction died with it: the run did not end, and is not in the profile.
    assert AgentRun.objects.get(pk=run_id).status == "running"
    assert [entry["run_id"] for entry in AgentProfile.objects.get(owner=alice).window] == [0]

    stack.worker.start()  # the lease runs out, a sweep puts the run back, the new worker ends it
    run = stack.wait_for_run(run_id, timeout=30)
    assert_one_reply(run, REPLY)
    profile = AgentProfile.objects.get(owner=alice)
    assert [entry["run_id"] for entry in profile.window] == [0, run_id]
    assert profile.invocations == 2
    assert profile.window[1]["status"] == "success"
    page.close()
