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

from django.db import close_old_connections, connection
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from assistant.models import AgentRun

logger = logging.getLogger(__name__)

LEASE_SECONDS = 10.0


def new_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_claim(run_id: int, holder: str) -> AgentRun | None:
    """Take the run if it is queued, or running under an expired lease. Returns it, or None if not ours."""
    now = timezone.now()
    claimed = (
        AgentRun.objects.filter(pk=run_id, status__in=[AgentRun.Status.QUEUED, AgentRun.Status.RUNNING])
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .update(
            status=AgentRun.Status.RUNNING,
            lease_owner=holder,
            lease_expires_at=now + timedelta(seconds=LEASE_SECONDS),
            attempts=F("attempts") + 1,
            started_at=Coalesce(F("started_at"), now),
            clock_started_at=Coalesce(F("clock_started_at"), now),
        )
    )
    if not claimed:
        return None
    return AgentRun.objects.select_related("owner", "chat").get(pk=run_id)


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
            while not self._stop.wait(LEASE_SECONDS / 3):
                renewed = AgentRun.objects.filter(pk=self.run_id, lease_owner=self.holder).update(
                    lease_expires_at=timezone.now() + timedelta(seconds=LEASE_SECONDS)
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
