"""Finds runs that lost their worker and puts them back to work, and ends runs stuck past their time.

Every worker runs this every few seconds (see assistant/tasks.py). It is safe to run anywhere and
concurrently: re-enqueueing a run only gives workers a chance to claim it, and the lease decides who does.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from assistant.conf import assistant_settings
from assistant.models import AgentRun
from assistant.services import run_finish, run_setting

logger = logging.getLogger(__name__)

# Past its wall-time limit plus this, a working run is over, whatever its worker thinks.
WALL_GRACE_SECONDS = 30


def sweep_runs(*, enqueue: object = None) -> dict[str, list[int]]:
    """Returns the ids it re-enqueued and the ids it timed out."""
    from assistant.tasks import run_turn

    now = timezone.now()
    # A queued run that no worker has claimed for this long was probably lost from the broker.
    queued_grace = timedelta(seconds=float(assistant_settings.QUEUED_GRACE_SECONDS))
    requeue = list(
        AgentRun.objects.filter(
            Q(status=AgentRun.Status.RUNNING, lease_expires_at__lt=now)
            | Q(status=AgentRun.Status.QUEUED, lease_expires_at__isnull=True,
                created_at__lt=now - queued_grace)
        ).values_list("pk", flat=True)[:100]
    )
    timed_out: list[int] = []
    for run in AgentRun.objects.filter(status=AgentRun.Status.RUNNING).only("pk", "config", "clock_started_at"):
        limit = float(run_setting(run, "MAX_WALL_SECONDS"))
        if run.clock_started_at and now - run.clock_started_at > timedelta(seconds=limit + WALL_GRACE_SECONDS):
            timed_out.append(run.pk)
    for run_id in timed_out:
        with transaction.atomic():
            stuck = AgentRun.objects.select_for_update(skip_locked=True).filter(pk=run_id, status="running").first()
            if stuck is not None:
                run_finish(run=stuck, status=AgentRun.Status.TIMED_OUT, stop_reason="swept",
                           error="The assistant took too long on this request and was stopped.")
    for run_id in requeue:
        if run_id not in timed_out:
            run_turn.delay(run_id)
    if requeue or timed_out:
        logger.info("Swept runs: re-enqueued %s, timed out %s", requeue, timed_out)
    return {"requeued": [pk for pk in requeue if pk not in timed_out], "timed_out": timed_out}
