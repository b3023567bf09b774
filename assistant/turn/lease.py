"""Which worker holds a run. A worker claims a run with a short lease and renews it from a heartbeat
thread while it lives; a run whose lease ran out belongs to a dead worker and may be taken up again.

This is what makes redelivery safe: Celery may hand the same run to two workers (late acknowledgement,
the sweeper re-enqueueing), but only the one whose conditional UPDATE wins works on it. The holder string
is also a fencing token: a worker presumed dead that goes on anyway (a long pause, a partition) cannot
write, because every write of a turn only happens while the run's `lease_owner` is still its holder
(see `assistant.turn.fence`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta
from functools import cache

from django.db import close_old_connections, connection
from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.models import AgentRun

logger = logging.getLogger(__name__)


def configured_lease_seconds() -> float:
    """How long a claim or a renewal holds the run (the LEASE_SECONDS setting)."""
    return float(assistant_settings.LEASE_SECONDS)


# A worker stops acting on a run when this share of its lease is still left, so that no other worker can
# take the run over while this one still works on it (the clocks of two hosts may differ a little).
LEASE_SAFETY_FRACTION = 0.2


class LeaseLost(Exception):
    """This worker no longer holds the run (another one took it over, or the lease could not be renewed
    in time): it must stop touching it. Every write of a turn is fenced by the lease and raises this
    instead of changing anything."""


def new_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@cache
def _claim_sql() -> str:
    # The conditional UPDATE and the read of the claimed row in one statement (RETURNING): the ORM's
    # update() returns only a count, and a second query would cost a round trip plus its compilation
    # on every turn. Column names come from the model, so this follows renames.
    meta = AgentRun._meta
    columns = ", ".join(f'"{field.column}"' for field in meta.concrete_fields)
    # Identifiers come from the model's own metadata; every value is a parameter.
    table = meta.db_table
    return (
        f'UPDATE "{table}" SET "status" = %s, "lease_owner" = %s, "lease_expires_at" = %s, '  # noqa: S608
        '"attempts" = "attempts" + 1, "started_at" = COALESCE("started_at", %s), '
        '"clock_started_at" = COALESCE("clock_started_at", %s) '
        'WHERE "id" = %s AND "status" IN (%s, %s) AND ("lease_expires_at" IS NULL OR "lease_expires_at" < %s) '
        f"RETURNING {columns}"
    )


def lease_claim(run_id: int, holder: str, *, lease_seconds: float | None = None) -> AgentRun | None:
    """Take the run if it is queued, or running under an expired lease. Returns it, or None if not ours.

    `holder` is the fencing token: every later write of the turn only happens while the run's
    `lease_owner` is still this string, and a later claim replaces it."""
    now = timezone.now()
    if lease_seconds is None:
        lease_seconds = configured_lease_seconds()
    params = [
        AgentRun.Status.RUNNING, holder, now + timedelta(seconds=lease_seconds), now, now,
        run_id, AgentRun.Status.QUEUED, AgentRun.Status.RUNNING, now,
    ]
    return next(iter(AgentRun.objects.raw(_claim_sql(), params)), None)


def lease_release(run_id: int, holder: str) -> None:
    AgentRun.objects.filter(pk=run_id, lease_owner=holder).update(lease_owner="", lease_expires_at=None)


class Heartbeat:
    """Renews the lease every third of its length until stopped, and says whether this worker may still
    act on the run.

    `lost` is set once another holder took the run, or once the lease could not be renewed before it
    would run out (the database is unreachable): the worker then stops before another worker could claim
    the run. A failed renewal is retried until then, so a brief outage costs nothing. `holds()` also
    answers False past that moment when the heartbeat itself is stuck in a hanging call. `cancelled` is set
    once the database says the user stopped the run (the loop watches the faster Redis flag; this is the
    backstop when that flag was lost).
    """

    def __init__(self, run_id: int, holder: str, *, lease_seconds: float | None = None) -> None:
        self.run_id, self.holder = run_id, holder
        self.lease_seconds = configured_lease_seconds() if lease_seconds is None else lease_seconds
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._stop = threading.Event()
        # The claim has just written an expiry `lease_seconds` from now.
        self._acting_deadline = self._deadline_after(time.monotonic())
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def _deadline_after(self, renewed_at: float) -> float:
        return renewed_at + self.lease_seconds * (1 - LEASE_SAFETY_FRACTION)

    def holds(self) -> bool:
        """May this worker still act on the run? False once lost, or past the last renewal's deadline."""
        return not self.lost.is_set() and time.monotonic() < self._acting_deadline

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        interval = self.lease_seconds / 3
        try:
            while not self._stop.wait(interval):
                attempted_at = time.monotonic()
                try:
                    held = self._renew()
                except Exception:
                    logger.warning("Lease heartbeat for run %s could not renew", self.run_id, exc_info=True)
                    connection.close()  # the next attempt starts on a fresh connection
                    left = self._acting_deadline - time.monotonic()
                    if left <= 0:
                        logger.error("Run %s: its lease could not be renewed in time; this worker stops", self.run_id)
                        self.lost.set()
                        return
                    interval = min(self.lease_seconds / 10, left)
                    continue
                if held is None:
                    self.lost.set()
                    return
                self._acting_deadline = self._deadline_after(attempted_at)
                interval = self.lease_seconds / 3
                if held:
                    self.cancelled.set()
        finally:
            close_old_connections()
            connection.close()

    def _renew(self) -> bool | None:
        """Extend the lease if this holder still has it: None when it does not, else the run's cancel flag."""
        expires = timezone.now() + timedelta(seconds=self.lease_seconds)
        with connection.cursor() as cursor:
            cursor.execute(_renew_sql(), [expires, self.run_id, self.holder])
            row = cursor.fetchone()
        return None if row is None else bool(row[0])


@cache
def _renew_sql() -> str:
    # One statement renews and reads the cancel flag (the ORM's update() returns only a count).
    table = AgentRun._meta.db_table
    return (
        f'UPDATE "{table}" SET "lease_expires_at" = %s '  # noqa: S608 (identifiers from the model's metadata)
        'WHERE "id" = %s AND "lease_owner" = %s RETURNING "cancel_requested"'
    )
