"""Which worker holds a run. A worker claims a run with a short lease and renews it from a heartbeat
thread while it lives; a run whose lease ran out belongs to a dead worker and may be taken up again.

This is what makes redelivery safe: Celery may hand the same run to two workers (late acknowledgement,
the sweeper re-enqueueing), but only the one whose conditional UPDATE wins works on it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from functools import cache

from django.db import close_old_connections, connection
from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.models import AgentRun

logger = logging.getLogger(__name__)


def lease_seconds() -> float:
    """How long a claim or a renewal holds the run (the LEASE_SECONDS setting)."""
    return float(assistant_settings.LEASE_SECONDS)


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


def lease_claim(run_id: int, holder: str) -> AgentRun | None:
    """Take the run if it is queued, or running under an expired lease. Returns it, or None if not ours."""
    now = timezone.now()
    params = [
        AgentRun.Status.RUNNING, holder, now + timedelta(seconds=lease_seconds()), now, now,
        run_id, AgentRun.Status.QUEUED, AgentRun.Status.RUNNING, now,
    ]
    return next(iter(AgentRun.objects.raw(_claim_sql(), params)), None)


def lease_release(run_id: int, holder: str) -> None:
    AgentRun.objects.filter(pk=run_id, lease_owner=holder).update(lease_owner="", lease_expires_at=None)


class Heartbeat:
    """Renews the lease every third of its length until stopped. `lost` is set if another holder took
    the run; `cancelled` once the database says the user stopped it (the loop also watches the faster
    Redis flag, so this is the backstop when that flag was lost)."""

    def __init__(self, run_id: int, holder: str) -> None:
        self.run_id, self.holder = run_id, holder
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(lease_seconds() / 3):
                renewed = AgentRun.objects.filter(pk=self.run_id, lease_owner=self.holder).update(
                    lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
                )
                if not renewed:
                    self.lost.set()
                    return
                if AgentRun.objects.filter(pk=self.run_id, cancel_requested=True).exists():
                    self.cancelled.set()
        except Exception:
            # A heartbeat that cannot reach the database lets the lease lapse; the run's own next
            # write will fail the same way, so nothing is done twice.
            logger.exception("Lease heartbeat for run %s stopped", self.run_id)
        finally:
            close_old_connections()
            connection.close()
